  const DATA = JSON.parse(document.getElementById("data").textContent);
  // Viridis at five stops, matching the matplotlib PNGs.
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const LABELS = { encoder: "encoder self", decoder: "decoder self", cross: "cross" };  // the kinds, as Python names them

  function colour(v, vmax) {
    if (v === null) return "#ddd";  // masked (e.g. -inf score, null in JSON)
    const x = Math.min(Math.max(v / vmax, 0), 1) * (STOPS.length - 1);
    const i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
    const c = STOPS[i].map((a, k) => Math.round(a + f * (STOPS[i + 1][k] - a)));
    return "rgb(" + c.join(",") + ")";
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {  // el() for the SVG of curves
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const fmt = (x, d) => (x === null ? "masked" : x.toFixed(d));
  const label = (labels, i) => (i < labels.length ? labels[i] : "#" + i);

  // The single heatmap renderer: a table whose cells are coloured by weight, query tokens as
  // row labels, key tokens as column labels; hovering shows "query → key: weight".
  function drawHeatmap(host, matrix, rows, cols, opts) {
    opts = opts || {};
    const vmax = opts.vmax || 1;
    const table = el("table", { class: "heatmap" });
    const head = el("tr");
    head.appendChild(el("th"));
    (matrix[0] || []).forEach((_, c) => head.appendChild(el("th", { class: "col" }, label(cols, c))));
    table.appendChild(head);
    matrix.forEach((row, r) => {
      const tr = el("tr");
      tr.appendChild(el("th", { class: "row" }, label(rows, r)));
      row.forEach((v, c) => {
        const td = el("td");
        td.style.background = colour(v, vmax);
        td.title = label(rows, r) + " \u2192 " + label(cols, c) + ": " + fmt(v, 3) +
                   (opts.detail ? opts.detail(r, c) : "");
        if (opts.marks && opts.marks.has(r + "," + c)) td.classList.add("link");
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    const legend = el("div", { class: "legend" }), bar = el("span", { class: "bar" });
    bar.style.background = "linear-gradient(to right, " + STOPS.map((c) => "rgb(" + c.join(",") + ")").join(", ") + ")";
    legend.append(el("span", {}, "0"), bar, el("span", {}, String(+vmax.toFixed(3))));
    const status = el("div", { class: "status" }, "hover over a cell");
    table.addEventListener("mouseover", (ev) => {
      const td = ev.target.closest("td");
      if (td) status.textContent = td.title;
    });
    if (opts.onCell) {  // a click on a cell or a row label: onCell(row, column or null)
      table.classList.add("clickable");
      table.addEventListener("click", (ev) => {
        const cell = ev.target.closest("td, th.row");
        if (cell) opts.onCell(cell.parentElement.rowIndex - 1, cell.tagName === "TD" ? cell.cellIndex - 1 : null);
      });
    }
    const scroll = el("div", { class: "scroll" });
    scroll.appendChild(table);
    host.replaceChildren(scroll, legend, status);
    host.setAttribute("data-cells", String(matrix.length * (matrix[0] || []).length));
  }

  function select(cls, options, chosen) {
    const s = el("select", { class: cls });
    options.forEach(([value, text]) => s.appendChild(el("option", { value: value }, text)));
    if (chosen !== undefined) s.value = chosen;
    return s;
  }

  // Word links over the word-level attention: links are [source word, target word], the
  // matrix is [target][source]; summed over source pieces a weight may exceed 1.
  function drawAlignment(host, a) {
    const marks = new Set(a.links.map(([i, j]) => j + "," + i));
    const vmax = Math.max(1, ...a.matrix.flat().filter((v) => v !== null));
    drawHeatmap(host, a.matrix, a.tgt_words, a.src_words, { marks: marks, vmax: vmax });
    host.setAttribute("data-links", String(a.links.length));
  }

  // BLEU against `labels.x` (default: the training step, one point per validation), each point
  // titled with its BLEU and chrF; points are {step, bleu, chrf}.
  function drawCurve(host, points, labels) {
    labels = labels || { x: "step", y: "val BLEU" };
    const W = 520, H = 220, M = { l: 44, r: 12, t: 10, b: 34 };
    const steps = points.map((p) => p.step), bleus = points.map((p) => p.bleu);
    const x0 = Math.min(...steps), x1 = Math.max(...steps), y1 = Math.ceil(Math.max(...bleus) + 1);
    const y0 = Math.max(0, Math.floor(Math.min(...bleus) - 1));
    const x = (s) => M.l + (x1 === x0 ? 0.5 : (s - x0) / (x1 - x0)) * (W - M.l - M.r);
    const y = (b) => H - M.b - ((b - y0) / (y1 - y0)) * (H - M.t - M.b);
    const root = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "curve" });
    root.append(
      svg("line", { x1: M.l, y1: H - M.b, x2: W - M.r, y2: H - M.b, stroke: "#888" }),
      svg("line", { x1: M.l, y1: M.t, x2: M.l, y2: H - M.b, stroke: "#888" }),
      svg("text", { x: M.l - 6, y: y(y1) + 4, "text-anchor": "end", "font-size": 11 }, String(y1)),
      svg("text", { x: M.l - 6, y: y(y0) + 4, "text-anchor": "end", "font-size": 11 }, String(y0)),
      svg("text", { x: 12, y: (H - M.b) / 2, "font-size": 11, transform: "rotate(-90 12 " + (H - M.b) / 2 + ")" }, labels.y),
      svg("text", { x: M.l, y: H - 8, "font-size": 11 }, labels.x + " " + x0),
      svg("text", { x: W - M.r, y: H - 8, "text-anchor": "end", "font-size": 11 }, labels.x + " " + x1),
      svg("polyline", { points: points.map((p) => x(p.step) + "," + y(p.bleu)).join(" "), fill: "none", stroke: "#3b528b", "stroke-width": 2 }),
    );
    points.forEach((p) => {
      const dot = svg("circle", { cx: x(p.step), cy: y(p.bleu), r: 4, fill: "#21918c" });
      dot.appendChild(svg("title", {}, labels.x + " " + p.step + ": BLEU " + p.bleu.toFixed(2) +
                                       (p.chrf === null ? "" : ", chrF " + p.chrf.toFixed(2))));
      root.appendChild(dot);
    });
    host.replaceChildren(root);
    host.setAttribute("data-points", String(points.length));
  }

  // A table of `rows` ({key: value}) in `columns` ([[key, heading]]); clicking a heading sorts
  // by it, a second click reverses. Numbers show 3 decimals; null is blank.
  function sortableTable(host, columns, rows) {
    let by = null, desc = true;
    const cell = (v) => (v === null || v === undefined ? "" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : String(v));
    function draw() {
      const key = by;
      const sorted = key === null ? rows : rows.slice().sort((a, b) => {
        const x = a[key], y = b[key];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;  // blanks last either way
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * (desc ? -1 : 1);
      });
      const table = el("table", { class: "plain sortable" }), head = el("tr");
      columns.forEach(([k, heading]) => {
        const th = el("th", { "data-key": k }, heading + (k === by ? (desc ? " \u25bc" : " \u25b2") : ""));
        th.onclick = () => { desc = k === by ? !desc : true; by = k; draw(); };
        head.appendChild(th);
      });
      table.appendChild(head);
      sorted.forEach((r) => {
        const tr = el("tr");
        columns.forEach(([k]) => tr.appendChild(el("td", {}, cell(r[k]))));
        table.appendChild(tr);
      });
      host.replaceChildren(table);
      host.setAttribute("data-sorted", by === null ? "" : by + (desc ? " desc" : " asc"));
    }
    draw();
  }

  // heads.py's findings: per kind a layers × heads grid of the BLEU lost when the head is
  // masked, the sortable table of every head, and the pruning curve.
  function drawHeads(h) {
    const grids = document.getElementById("heads-grids");
    const vmax = Math.max(1e-9, ...h.heads.map((r) => r.bleu_drop));
    Object.keys(LABELS).forEach((kind) => {
      const rows = h.heads.filter((r) => r.kind === kind);
      if (!rows.length) return;
      const L = Math.max(...rows.map((r) => r.layer)) + 1, H = Math.max(...rows.map((r) => r.head)) + 1;
      const grid = [...Array(L)].map(() => Array(H).fill(null));
      rows.forEach((r) => { grid[r.layer][r.head] = r.bleu_drop; });
      const host = el("div", { class: "grid", "data-kind": kind });
      grids.append(el("h4", {}, LABELS[kind]), host);
      drawHeatmap(host, grid, [...Array(L).keys()].map((l) => "layer " + l), [...Array(H).keys()].map((n) => "head " + n),
                  { vmax: vmax });
    });
    sortableTable(document.getElementById("heads-table"), h.columns, h.heads);
    if (h.pruning.length) {
      drawCurve(document.getElementById("heads-curve"), h.pruning.map((p) => ({ step: p.removed, bleu: p.bleu, chrf: p.chrf })),
                { x: "heads masked", y: "BLEU" });
    }
  }

  // One head's weights (hover: the score) and what each key adds, ‖α·W_O v‖ (hover: the weight),
  // of {weights, scores, contributions, query_tokens, key_tokens}; onCell(row, column): a click.
  function drawHeadMaps(weightsHost, addedHost, d, onCell) {
    drawHeatmap(weightsHost, d.weights, d.query_tokens, d.key_tokens,
      { detail: (r, c) => " (score " + fmt(d.scores[r][c], 3) + ")", onCell: onCell });
    const vmax = Math.max(1e-9, ...d.contributions.flat().filter((v) => v !== null));
    drawHeatmap(addedHost, d.contributions, d.query_tokens, d.key_tokens,
      { vmax: vmax, detail: (r, c) => " (weight " + fmt(d.weights[r][c], 3) + ")", onCell: onCell });
  }

  // The translation's tokens shaded by probability (pale red: unsure), hover as report.html's
  // (probability, entropy, alternatives, ALTI+ source share); a click calls onPick(position).
  function drawTokens(host, scores, shares, onPick) {
    const line = el("p", { class: "tokens" });
    scores.forEach((t, i) => {
      const title = "p " + t.prob.toFixed(3) + " · entropy " + t.entropy.toFixed(2) + " · top: " +
        t.top.map(([w, q]) => w + " " + q.toFixed(3)).join(", ") + (shares ? " · source share " + shares[i].toFixed(2) : "");
      const span = el("span", { class: "tok", "data-row": String(i), title: title }, t.token);
      span.style.background = "hsl(" + Math.round(120 * t.prob) + ",70%,88%)";
      span.onclick = () => onPick(i);
      line.append(span, " ");
    });
    host.replaceChildren(line);
  }

  // A vector as a strip of components, blue below zero and red above (hover: each value).
  function strip(values, vmax, name) {
    const s = el("span", { class: "vec" });
    values.forEach((v, d) => {
      const x = Math.max(-1, Math.min(1, v / vmax)), a = Math.round(255 * (1 - Math.abs(x)));
      const c = el("i", { title: name + "[" + d + "] = " + fmt(v, 3) });
      c.style.background = x >= 0 ? "rgb(255," + a + "," + a + ")" : "rgb(" + a + "," + a + ",255)";
      s.appendChild(c);
    });
    return s;
  }

  // One query's walk through a head, bertviz's neuron view for every kind: its q; per key k,
  // q·k, q·k/√d_k, the softmax weight, v, α·v and ‖α·W_O v‖; the output Σ α·v last.
  function drawQuery(host, h) {
    const q = h.query, keys = h.key_tokens;
    const vmax = Math.max(1e-9, ...[q.q, ...q.k, ...q.v].flat().map(Math.abs));
    const table = el("table", { class: "plain neuron" }), head = el("tr");
    ["key", "k", "q·k", "q·k/√" + h.d_k, "softmax α", "v", "α·v", "‖α·W_O v‖"].forEach((t) => head.appendChild(el("th", {}, t)));
    const top = el("tr"), qcell = el("td", { colspan: "7" });
    qcell.append(strip(q.q, vmax, "q"));
    top.append(el("th", {}, "query: " + q.token), qcell);
    table.append(top, head);
    keys.forEach((key, j) => {
      const tr = el("tr", { "data-key": String(j) }), cell = (x) => el("td", { class: "n" }, fmt(x, 3));
      const vec = (v, name) => { const td = el("td"); td.appendChild(strip(v, vmax, name)); return td; };
      tr.append(el("th", {}, key), vec(q.k[j], "k"), cell(q.dots[j]), cell(q.scores[j]), cell(q.weights[j]),
                vec(q.v[j], "v"), vec(q.weighted[j], "α·v"), cell(q.contributions[j]));
      table.appendChild(tr);
    });
    const out = el("tr", { class: "output" }), ocell = el("td", { colspan: "7" });
    ocell.append(strip(q.output, vmax, "output"));
    out.append(el("th", {}, "output Σ α·v"), ocell);
    table.appendChild(out);
    const scroll = el("div", { class: "scroll" });
    scroll.appendChild(table);
    host.replaceChildren(scroll);
  }

