  // The attention viewer: kind / signal / layer / head selectors over {kind: {label, maps
  // [L][H][Tq][Tk], layers [L][Tq][Tk], rows, cols, signals: {name: {label, maps, layers}}}}:
  // `maps` and `layers` at the top are the attention weights (`layers` their heads' average);
  // `signals` the other signals (qkvmt.analysis.signals), whose `layers` is each layer as a whole,
  // whose `maps` is null where they have none per head, and whose L is 1 where they are of the
  // whole model. Layers and heads count from 0, as in the config and CLI (so a head seen here is
  // the one to pass to inspect_attention). Starts at `initial` {layer, head[, signal]} (head may be
  // "mean") where valid, else at the last layer as a whole; one kind hides the kind selector, and a
  // kind with weights only hides the signal selector.
  // A map may also come `without` its sinks ({label, maps, layers, cols, kept: the whole map's
  // columns it keeps}, made by the server: qkvmt.results.html.viewer_maps), or {refused: why}, and
  // its kind `sinks` (what is left out): a checkbox then draws that map instead, and is disabled,
  // saying why, where the map shown has none.
  // `opts` (the explorer): marks(kind) -> cells to dot, onCell(kind, row, column),
  // onShow({kind, layer, head, signal}) after each drawing, signals {kind: {signal: label}} with
  // signal(name, reading) -> a promise of {kind: {label, maps, layers}}: every signal listed, those
  // `kinds` has no maps of computed when chosen; readings [[label, kinds], ...]: several passes of
  // one sentence (`kinds` the first), switched by a selector that keeps kind, signal, layer and
  // head. Marks and clicks are the first reading's: the links and the inspector are of that pass.
  // Returns {draw}, to draw again (new marks) without a change of selection.
  function attentionViewer(host, kinds, initial, opts) {
    opts = opts || {};
    const readings = opts.readings || [[null, kinds]], names = Object.keys(kinds);
    const v = {
      host: host, opts: opts, readings: readings, at: 0, kinds: kinds, initial: initial, names: names,
      controls: el("div", { class: "controls" }), caption: el("p", { class: "caption" }), map: el("div", { class: "map" }),
      kind: select("kind", names.map((k) => [k, kinds[k].label]), names.includes("cross") ? "cross" : names[0]),
      reading: select("reading", readings.map(([label], i) => [i, label]), 0),
      signal: select("signal", [["weights", "attention weights"]], "weights"), layer: null, head: null, later: [],
      sinks: sinkToggle(readings),
    };
    v.kind.onchange = () => rebuildViewer(v);
    v.reading.onchange = () => switchReading(v);
    v.sinks.box.onchange = () => drawViewer(v);
    host.replaceChildren(v.controls, v.caption, v.map);
    rebuildViewer(v);
    return { draw: () => drawViewer(v) };
  }

  function sinkToggle(readings) {  // the checkbox of maps without their sinks, labelled by what they leave out
    const text = readings.flatMap(([, kinds]) => Object.values(kinds)).map((k) => k.sinks).find(Boolean);
    const box = el("input", { type: "checkbox", class: "sinks" }), why = el("span", { class: "why" });
    const label = el("label", { class: "sinks" });
    label.append(box, " " + text, why);
    return { box: box, why: why, label: text ? label : null };
  }

  const viewerEntry = (v) => (v.signal.value === "weights" ? v.kinds[v.kind.value] : v.kinds[v.kind.value].signals[v.signal.value]);

  // The map without its sinks when the checkbox asks for it and the server made one, else null;
  // the checkbox is disabled, saying why, where the map shown has none.
  function sinkless(v) {
    const w = viewerEntry(v).without;
    v.sinks.box.disabled = !w || !!w.refused;
    v.sinks.why.textContent = !w ? " (" + LABELS.cross + " attention only)" : w.refused ? " (not this map: " + w.refused + ")" : "";
    return v.sinks.box.checked && w && !w.refused ? w : null;
  }

  function keptMarks(marks, w) {  // cells to dot, moved to the columns of a map without its sinks
    if (!marks || !w) return marks;
    const moved = [...marks].map((m) => m.split(",").map(Number)).filter(([, c]) => w.kept.includes(c));
    return new Set(moved.map(([r, c]) => r + "," + w.kept.indexOf(c)));
  }

  function drawViewer(v) {
    const k = v.kinds[v.kind.value], w = sinkless(v), s = w || viewerEntry(v), first = v.at === 0, o = v.opts;
    const m = v.head.value === "mean" ? s.layers[+v.layer.value] : s.maps[+v.layer.value][+v.head.value];
    // weights lie in [0, 1]; other signals have no fixed top, so their map is scaled to its largest
    const vmax = v.signal.value === "weights" ? 1 : Math.max(1e-9, ...m.flat().filter((x) => x !== null));
    const marks = first && o.marks ? keptMarks(o.marks(v.kind.value), w) : null;
    const column = (c) => (w && c !== null ? w.kept[c] : c);
    const onCell = first && o.onCell ? (r, c) => o.onCell(v.kind.value, r, column(c)) : null;
    drawHeatmap(v.map, m, k.rows, w ? w.cols : k.cols, { vmax: vmax, marks: marks, onCell: onCell });
    const what = w ? w.label : v.signal.selectedOptions[0].textContent;
    v.caption.textContent = v.readings[v.at][0] ? v.readings[v.at][0] + ": " + what : what;
    v.host.setAttribute("data-shown", [v.kind.value, v.layer.value, v.head.value].join(" ") +
                        (v.signal.value === "weights" ? "" : " " + v.signal.value));
    if (v.readings.length > 1) v.host.setAttribute("data-reading", String(v.at));
    if (v.sinks.label) v.host.setAttribute("data-without", String(!!w));
    if (o.onShow) o.onShow({ kind: v.kind.value, layer: +v.layer.value, head: v.head.value, signal: v.signal.value });
  }

  function rebuildViewer(v) {  // signals, layer and head counts may differ between kinds, signals and readings
    const k = v.kinds[v.kind.value], valid = (i, n) => Number.isInteger(i) && i >= 0 && i < n;
    const start = v.initial || { layer: v.layer && +v.layer.value, head: v.head && v.head.value };
    v.initial = null;  // only the first drawing follows it
    const held = k.signals || {}, listed = (v.opts.signals || {})[v.kind.value] || {};
    const signals = Object.keys(listed).concat(Object.keys(held).filter((n) => !(n in listed))).filter((n) => n !== "weights");
    v.later = signals.filter((n) => !(n in held));
    const others = signals.map((n) => [n, n in held ? held[n].label : listed[n] + " (computed when chosen)"]);
    const want = start.signal || v.signal.value;  // a policy's own signal, first
    v.signal = select("signal", [["weights", "attention weights"]].concat(others), want in held ? want : "weights");
    const s = viewerEntry(v), L = s.layers.length, H = s.maps ? s.maps[0].length : 0, wholeModel = !s.maps && L === 1;
    v.layer = select("layer", [...Array(L).keys()].map((l) => [l, "layer " + l]), valid(start.layer, L) ? start.layer : L - 1);
    const whole = v.signal.value === "weights" ? "average over heads" : wholeModel ? "the whole model" : "the layer as a whole";
    const head = start.head === "mean" ? "mean" : +start.head;
    v.head = select("head", [["mean", whole]].concat([...Array(H).keys()].map((h) => [h, "head " + h])), valid(head, H) ? head : "mean");
    v.layer.onchange = v.head.onchange = () => drawViewer(v);
    v.signal.onchange = () => (v.later.includes(v.signal.value) ? computeSignal(v, v.signal.value) : rebuildViewer(v));
    v.controls.replaceChildren(...(v.readings.length > 1 ? [v.reading] : []), ...(v.names.length > 1 ? [v.kind] : []),
                               ...(others.length ? [v.signal] : []), ...(wholeModel ? [] : [v.layer]), v.head,
                               ...(v.sinks.label ? [v.sinks.label] : []));
    drawViewer(v);
  }

  function switchReading(v) {  // the other pass at the same kind, signal, layer and head; a signal it lacks, computed
    const want = v.signal.value;
    v.at = +v.reading.value;
    v.kinds = v.readings[v.at][1];
    if (want !== "weights" && !(want in (v.kinds[v.kind.value].signals || {}))) computeSignal(v, want);
    else rebuildViewer(v);
  }

  async function computeSignal(v, name) {  // a signal listed for later: fetched once per reading, then drawn as the others
    const start = { layer: +v.layer.value, head: v.head.value, signal: name }, kinds = v.kinds;
    const controls = () => v.controls.querySelectorAll("select, input");
    controls().forEach((c) => { c.disabled = true; });
    v.map.replaceChildren(el("p", { class: "status" }, "computing " + name.replace(/_/g, " ") + "…"));
    try {
      const got = await v.opts.signal(name, v.at);
      Object.entries(got).forEach(([k, maps]) => { kinds[k].signals = Object.assign(kinds[k].signals || {}, { [name]: maps }); });
      v.initial = start;
    } catch (e) {
      v.map.replaceChildren(el("p", { class: "error", role: "alert" }, "error: " + e.message));
      return;
    } finally {
      controls().forEach((c) => { c.disabled = false; });
    }
    rebuildViewer(v);
  }

