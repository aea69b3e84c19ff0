  // The explorer's "layers" panel (explore/lens_panel.py): what each layer already knows, as
  // Model.lens gives it, asked once per sentence. A slider over the encoder depths the answer
  // holds (1..L, never listed here) shows the translation the decoder makes from the first k
  // encoder layers (DecoderLens), each word the model's own translation lacks in a <mark>; the
  // table shows each decoder layer's top token and probability at each position of the model's
  // translation (logit lens), shaded where that layer already ranks the model's own token first.
  let lensAsked = 0;  // the latest sentence's answer wins, whatever order answers come in
  async function lensPanel(source, call) {
    const $ = (id) => document.getElementById(id), host = $("lens"), slider = $("lens-depth"), mine = ++lensAsked;
    const setState = (m) => host.setAttribute("data-state", m);
    slider.disabled = true;
    slider.oninput = null;
    [$("lens-depth-label"), $("lens-translation"), $("lens-model")].forEach((e) => e.replaceChildren());
    $("lens-table").replaceChildren();
    $("lens-error").hidden = true;
    host.removeAttribute("data-depth");
    setState("busy");
    let a;
    try {
      a = await call(DATA.api.lens, { source: source });
    } catch (e) {
      if (mine !== lensAsked) return;
      $("lens-error").textContent = "error: " + e.message;
      $("lens-error").hidden = false;
      setState("error");
      return;
    }
    if (mine !== lensAsked) return;
    const depths = a.encoder_depths, n = depths.length;
    function drawDepth() {
      const d = depths[+slider.value - 1], text = $("lens-translation");
      $("lens-depth-label").textContent = "encoder layers 1.." + d.layers + " of " + n + (d.layers === n ? " (the model) " : " ");
      text.replaceChildren();
      d.words.forEach((w, i) => text.append(...(i ? [" "] : []), d.changed[i] ? el("mark", {}, w) : w));
      host.setAttribute("data-depth", String(d.layers));
    }
    slider.min = "1";
    slider.max = String(n);
    slider.value = String(n);
    slider.oninput = drawDepth;
    slider.disabled = false;
    $("lens-model").textContent = a.translation;
    drawDepth();
    drawLogitLens($("lens-table"), a);
    setState("shown");
  }

  function drawLogitLens(host, a) {  // one row per decoder layer, one column per token of the model's translation
    const table = el("table", { class: "plain lens" }), head = el("tr");
    head.append(el("th", {}, "decoder layer"), ...a.tokens.map((t) => el("th", {}, t)));
    table.appendChild(head);
    a.decoder_layers.forEach((d) => {
      const row = el("tr", { "data-layer": String(d.layer) });
      row.appendChild(el("th", {}, String(d.layer)));
      d.top.forEach((top, i) => {
        const rank = d.rank_of_own_token[i];
        const cell = el("td", { class: rank === 0 ? "own" : "", title: a.tokens[i] + " is ranked " + (rank + 1) + "; top: " +
                                top.map((t) => t.token + " " + t.p.toFixed(3)).join(", ") });
        cell.append(el("span", { class: "top" }, top[0].token), " ", el("span", { class: "p" }, top[0].p.toFixed(2)));
        row.appendChild(cell);
      });
      table.appendChild(row);
    });
    const scroll = el("div", { class: "scroll" });
    scroll.appendChild(table);
    host.replaceChildren(scroll);
  }

