  // The explorer (scripts/explore.py): the page asks its server (DATA.api) for one sentence's
  // every view, then draws them with the functions above; heads and signals switch in the page,
  // and only a new policy, a (query, head), a target token's deletion curves or an edit ask again;
  // the layers panel (lens_panel.js) asks once per sentence. Errors come back as {error} and show.
  function explorer() {
    const $ = (id) => document.getElementById(id);
    const side = (kind) => (kind === "encoder" ? "src" : "tgt");
    let asked = 0, s = null;  // s: the sentence shown and what is chosen in it
    const state = (m) => document.body.setAttribute("data-state", m);
    async function call(path, body) {
      const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      let data;
      try { data = await response.json(); } catch (e) { throw new Error("the server answered " + response.status + " without JSON"); }
      if (!response.ok) throw new Error(data.error || "the server answered " + response.status);
      return data;
    }
    function fail(e) {
      $("error").textContent = "error: " + e.message;
      $("error").hidden = false;
      $("busy").textContent = "";
      state("error");
    }
    function marks(kind) {  // the policy's word links over the subword cross map
      if (kind !== "cross") return null;
      const a = s.r.alignment, cells = new Set();
      a.links.forEach(([i, j]) => a.tgt_groups[j].forEach((t) => a.src_groups[i].forEach((c) => cells.add(t + "," + c))));
      return cells;
    }
    function pick(where, row) {
      s.rows[where] = row;
      document.querySelectorAll("#tokens .tok").forEach((t) => t.classList.toggle("picked", where === "tgt" && +t.dataset.row === row));
      inspect();
    }
    async function inspect() {
      const host = $("inspector"), shown = s.shown, row = s.rows[side(shown.kind)];
      if (row === null) return;
      if (shown.head === "mean") {
        host.replaceChildren(el("p", {}, "Choose one head (not the layer as a whole) to see its queries, keys and values."));
        return;
      }
      const body = { source: s.r.source, kind: shown.kind, layer: shown.layer, head: +shown.head, row: row };
      const key = JSON.stringify(body), mine = s;
      s.want = key;
      if (!s.heads.has(key)) {
        $("busy").textContent = "inspecting…";
        try { s.heads.set(key, await call(DATA.api.inspect, body)); } catch (e) { if (mine === s) fail(e); return; }
        $("busy").textContent = "";
      }
      if (mine !== s || s.want !== key) return;  // another sentence, query or head was chosen meanwhile
      const h = s.heads.get(key), weights = el("div", { class: "weights" }), added = el("div", { class: "added" });
      const neuron = el("div", { class: "query" });
      host.replaceChildren(el("p", {}, LABELS[h.kind] + " attention, layer " + h.layer + ", head " + h.head + ", d_k " + h.d_k +
                                        "; query " + h.query.row + ": " + h.query.token), neuron,
                           el("h3", {}, "The whole head: weights"), weights, el("h3", {}, "What each key adds: ‖α·W_O v‖"), added);
      drawQuery(neuron, h);
      drawHeadMaps(weights, added, h, (r) => pick(side(h.kind), r));
      host.setAttribute("data-shown", [h.kind, h.layer, h.head, h.query.row].join(" "));
      state("shown");
    }
    function drawPolicy() {
      const a = s.r.alignment;
      $("pharaoh").textContent = "Pharaoh: " + a.pharaoh;
      drawAlignment($("words"), a);
      s.viewer.draw();
    }
    function policyControls(policy) {  // the links of the latest choice win, whatever order answers come in
      let latest = 0;
      const want = Object.assign({}, policy);
      $("policy").replaceChildren(...Object.entries(DATA.choices).map(([name, values]) => {
        const sel = select("policy-" + name, values.map((v) => [v, name + " " + v]), policy[name]);
        sel.onchange = async () => {
          want[name] = values.find((v) => String(v) === sel.value);
          const mine = s, asking = ++latest;
          try {
            const a = await call(DATA.api.align, { source: mine.r.source, policy: want });
            if (mine === s && asking === latest) { s.r.alignment = a; drawPolicy(); }
          } catch (e) { if (mine === s && asking === latest) fail(e); }
        };
        return sel;
      }));
    }
    // One target token's deletion curves: x the fraction of source tokens deleted, y the drop of
    // log p; one line per signal at the chosen layer (a whole-model signal has one), random dashed.
    const PALETTE = ["#3b528b", "#e4572e", "#21918c", "#9c179e", "#f0a202", "#5c8001", "#17becf", "#2d7dd2", "#7f5539"];
    function drawDeletion(host, c, layer) {
      const W = 640, H = 240, M = { l: 48, r: 250, t: 10, b: 34 };
      const signals = [...new Set(c.readings.map((r) => r.signal))];
      const lines = c.readings.filter((r) => r.layer === null || r.layer === layer)
        .map((r) => ({ label: r.label, drops: r.drops, colour: PALETTE[signals.indexOf(r.signal) % PALETTE.length] }));
      if (c.random) lines.push({ label: "random order (mean)", drops: c.random, colour: "#666", dashed: true });
      const ys = lines.flatMap((l) => l.drops).filter((v) => v !== null);
      const y0 = Math.min(0, ...ys), y1 = Math.max(y0 + 1e-6, ...ys), f = c.fractions;
      const x = (v) => M.l + ((v - f[0]) / Math.max(1e-9, f[f.length - 1] - f[0])) * (W - M.l - M.r);
      const y = (v) => H - M.b - ((v - y0) / (y1 - y0)) * (H - M.t - M.b);
      const root = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "curve deletion" });
      const right = W - M.r;
      root.append(
        svg("line", { x1: M.l, y1: H - M.b, x2: right, y2: H - M.b, stroke: "#888" }),
        svg("line", { x1: M.l, y1: M.t, x2: M.l, y2: H - M.b, stroke: "#888" }),
        svg("line", { x1: M.l, y1: y(0), x2: right, y2: y(0), stroke: "#ccc" }),
        svg("text", { x: M.l - 6, y: y(y1) + 4, "text-anchor": "end", "font-size": 11 }, y1.toFixed(2)),
        svg("text", { x: M.l - 6, y: y(y0) + 4, "text-anchor": "end", "font-size": 11 }, y0.toFixed(2)),
        svg("text", { x: 12, y: (H - M.b) / 2, "font-size": 11, "text-anchor": "middle",
                      transform: "rotate(-90 12 " + (H - M.b) / 2 + ")" }, "drop of log p"),
        svg("text", { x: (M.l + right) / 2, y: H - 4, "font-size": 11, "text-anchor": "middle" }, "fraction of source tokens deleted (tokens)"),
      );
      f.forEach((v, i) => root.appendChild(svg("text", { x: x(v), y: H - M.b + 14, "font-size": 10, "text-anchor": "middle" },
                                                   v + " (" + c.ks[i] + ")")));
      lines.forEach((l, i) => {
        const points = l.drops.map((v, j) => [x(f[j]), v === null ? null : y(v)]).filter(([, v]) => v !== null);
        const line = svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: l.colour,
                                       "stroke-width": 2, class: "reading", "data-label": l.label });
        if (l.dashed) line.setAttribute("stroke-dasharray", "5 4");
        line.appendChild(svg("title", {}, l.label + ": " + l.drops.map((v) => fmt(v, 3)).join(", ")));
        const item = svg("g", { class: "legend-item" });
        const ly = M.t + 8 + i * 16;
        item.append(svg("line", { x1: right + 12, y1: ly, x2: right + 36, y2: ly, stroke: l.colour, "stroke-width": 2,
                                  "stroke-dasharray": l.dashed ? "5 4" : "none" }),
                    svg("text", { x: right + 42, y: ly + 4, "font-size": 11 }, l.label));
        root.append(line, item);
      });
      host.replaceChildren(root);
      host.setAttribute("data-lines", String(lines.length));
      host.setAttribute("data-shown", c.row + " " + layer);
    }
    function deletionControls(rows, layers) {  // the latest choice wins, whatever order answers come in
      const token = select("deletion-row", [["", "choose a target token"]].concat(rows.map((t, i) => [i, i + ": " + t])), "");
      const layer = select("deletion-layer", [...Array(layers).keys()].map((l) => [l, "layer " + l]), layers - 1);
      const host = $("curves");
      let latest = 0;
      async function draw() {
        if (token.value === "") return;
        const row = +token.value, mine = s, asking = ++latest;
        if (!s.curves.has(row)) {
          $("busy").textContent = "deleting source tokens…";
          host.setAttribute("data-state", "busy");
          try { s.curves.set(row, await call(DATA.api.curves, { source: mine.r.source, row: row })); }
          catch (e) { if (mine === s && asking === latest) fail(e); return; }
          if (mine !== s || asking !== latest) return;
        }
        $("busy").textContent = "";
        drawDeletion(host, s.curves.get(row), +layer.value);
        host.setAttribute("data-state", "shown");
      }
      token.onchange = layer.onchange = draw;
      $("deletion").replaceChildren(token, layer);
      host.replaceChildren();
      host.removeAttribute("data-shown");
      host.removeAttribute("data-state");
    }
    function drawBoth(b) {
      $("both").hidden = !b;
      if (!b) return;
      if (b.error) { $("both-what").textContent = b.error; $("both-map").replaceChildren(); return; }
      const has = (links) => new Set(links.map(([i, j]) => i + "," + j)), f = has(b.forward_links), r = has(b.reverse_links);
      const how = b.threshold === null ? b.method : b.method + " (at least " + b.threshold + " of the two models' weights)";
      $("both-what").textContent = how + " of this model's links (forward) and the reverse model's: a cell is 1 where " +
        "both link the words, 0.5 where one does; a dot marks a symmetrized link.";
      const matrix = b.tgt_words.map((_, j) => b.src_words.map((_, i) => (f.has(i + "," + j) + r.has(i + "," + j)) / 2));
      drawAlignment($("both-map"), { matrix: matrix, links: b.links, src_words: b.src_words, tgt_words: b.tgt_words });
    }
    // The "what if" panel: two source tokens picked in its row, an edit of the attention the
    // viewer shows (its kind, optionally its layer), sent as the server's edits take it (DATA.what_if:
    // each edit's parts, kinds and the fields it takes: the picked tokens a, b or the head chosen).
    // The answer is Model.intervene's: both translations, a <mark> per changed word, the log p change.
    function whatIf(r) {
      const host = $("what-if"), tokens = r.attention.cross.cols, picked = [], buttons = [];
      let shown = null, latest = 0;
      const only = el("input", { type: "checkbox", id: "what-if-layer" }), onlyText = el("span");
      const setState = (m) => host.setAttribute("data-state", m);
      function drawPicked() {
        document.querySelectorAll("#what-if-tokens .tok").forEach((t) => t.classList.toggle("picked", picked.includes(+t.dataset.pos)));
        $("what-if-picked").textContent = "picked: " + (picked.length ? picked.map((p) => p + " " + tokens[p]).join(", ") :
                                                        "none (click two source tokens)");
      }
      $("what-if-tokens").replaceChildren(...tokens.flatMap((t, i) => {
        const span = el("span", { class: "tok", "data-pos": String(i) }, t);
        span.onclick = () => {  // a second click unpicks; a third token replaces the earlier of the two
          const at = picked.indexOf(i);
          if (at >= 0) picked.splice(at, 1);
          else if (picked.push(i) > 2) picked.shift();
          drawPicked();
        };
        return [span, " "];
      }));
      $("what-if-clear").onclick = () => { picked.length = 0; drawPicked(); };
      const head = () => (shown.head === "mean" ? null : +shown.head);
      function request(name, what) {
        const takes = DATA.what_if[name].takes, body = { source: r.source, edit: name, what: what, kind: shown.kind,
                                                          layer: only.checked ? shown.layer : null };
        if (takes.includes("a")) { body.a = picked.length > 0 ? picked[0] : null; body.b = picked.length > 1 ? picked[1] : null; }
        if (takes.includes("head")) body.head = head();
        return body;
      }
      function drawAnswer(a) {
        const edited = el("dd", { id: "what-if-edited" });
        a.edited_words.forEach((w, i) => edited.append(...(i ? [" "] : []), a.changed[i] ? el("mark", {}, w) : w));
        const { edit: type, ...fields } = a.edit;  // describe(edit): its type and fields, null: every one
        const edit = type + ": " + Object.entries(fields).filter(([, v]) => v !== null).map(([k, v]) => k + " " + v).join(", ");
        const sign = a.log_prob_change >= 0 ? "+" : "";
        $("what-if-result").replaceChildren(el("dt", {}, "edit"), el("dd", {}, edit), el("dt", {}, "original"),
          el("dd", { id: "what-if-original" }, a.original), el("dt", {}, "edited"), edited,
          el("dt", {}, "log p of the original"), el("dd", { id: "what-if-change" }, a.log_prob_total.toFixed(3) + " → " +
            a.log_prob_edited_total.toFixed(3) + " (" + sign + a.log_prob_change.toFixed(3) + ")"));
        $("what-if-result").hidden = false;
      }
      async function ask(name, what) {
        const mine = s, asking = ++latest;
        $("what-if-error").hidden = true;
        setState("busy");
        $("busy").textContent = "translating with the edit…";
        try {
          const a = await call(DATA.api.intervene, request(name, what));
          if (mine !== s || asking !== latest) return;
          $("busy").textContent = "";
          drawAnswer(a);
          setState("shown");
        } catch (e) {
          if (mine !== s || asking !== latest) return;
          $("busy").textContent = "";
          $("what-if-error").textContent = "error: " + e.message;
          $("what-if-error").hidden = false;
          setState("error");
        }
      }
      Object.entries(DATA.what_if).forEach(([name, edit]) => edit.what.forEach((what) => {
        const b = el("button", { type: "button", class: "what-if-edit", "data-edit": name, "data-what": what });
        b.onclick = () => ask(name, what);
        buttons.push([b, name, what]);
      }));
      const label = el("label");
      label.append(only, " ", onlyText);
      $("what-if-controls").replaceChildren(label, ...buttons.map(([b]) => b));
      $("what-if-result").hidden = true;
      $("what-if-error").hidden = true;
      host.removeAttribute("data-state");
      drawPicked();
      function scope(v) {  // the viewer's choice: what the buttons act on
        shown = v;
        onlyText.textContent = "only layer " + v.layer + " (the layer shown)";
        const refused = new Set();
        buttons.forEach(([b, name, what]) => {
          const edit = DATA.what_if[name], byHead = edit.takes.includes("head");
          const kindOk = edit.kind.includes(v.kind), headOk = !byHead || head() !== null;
          b.disabled = !kindOk || !headOk;
          b.textContent = name + " " + what + (byHead && headOk ? " of head " + head() : "");
          if (!kindOk) refused.add(name + ": " + edit.kind.map((k) => LABELS[k]).join(" or ") + " attention only");
          else if (!headOk) refused.add(name + ": choose one head above");
        });
        $("what-if-scope").textContent = "acts on " + LABELS[v.kind] + " attention, " + (only.checked ? "layer " + v.layer : "every layer") +
          [...refused].map((t) => "; " + t).join("");
      }
      only.onchange = () => scope(shown);
      return { scope: scope };
    }
    function show(r) {
      s = { r: r, rows: { src: null, tgt: null }, heads: new Map(), curves: new Map(), shown: null, want: null };
      s.whatIf = whatIf(r);
      const texts = [["source", r.source]].concat(r.reference === null ? [] : [["reference", r.reference]], [["translation", r.translation]]);
      if (r.scores) texts.push(["sentence scores", "BLEU " + r.scores.bleu.toFixed(1) + " · chrF " + r.scores.chrf.toFixed(1) +
                                "  (" + r.scores.signatures.sentence_bleu + "; " + r.scores.signatures.sentence_chrf + ")"]);
      $("texts").replaceChildren(...texts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
      drawTokens($("tokens"), r.token_scores, r.source_share, (t) => pick("tgt", t));
      $("inspector").replaceChildren(el("p", {}, "Click a token and choose a head."));
      $("inspector").removeAttribute("data-shown");
      const p = r.alignment.policy;
      // With a reference, its teacher-forced pass beside the model's own: the viewer switches between them.
      const readings = r.reference_attention && [["model's translation", r.attention], ["reference (teacher-forced)", r.reference_attention]];
      const of = (reading) => (reading ? { reference: r.reference } : {});
      s.viewer = attentionViewer($("viewer"), r.attention, { layer: p.layer, head: p.head, signal: p.signal }, {
        marks: marks, onCell: (kind, row) => pick(side(kind), row), onShow: (shown) => { s.shown = shown; s.whatIf.scope(shown); inspect(); },
        signals: DATA.signals, readings: readings,
        signal: (name, reading) => call(DATA.api.signal, Object.assign({ source: r.source, signal: name }, of(reading))) });
      policyControls(p);
      drawPolicy();
      drawBoth(r.symmetrized);
      deletionControls(r.attention.cross.rows, r.attention.cross.layers.length);
      $("result").hidden = false;
      lensPanel(r.source, call);
    }
    $("ask").onsubmit = async (ev) => {
      ev.preventDefault();
      const mine = ++asked;
      $("error").hidden = true;
      $("busy").textContent = "translating…";
      state("busy");
      try {
        const r = await call(DATA.api.sentence, { source: $("source").value, reference: $("reference").value });
        if (mine !== asked) return;
        $("busy").textContent = "";
        show(r);
        state("shown");
      } catch (e) {
        if (mine === asked) fail(e);
      }
    };
    state("ready");
  }

