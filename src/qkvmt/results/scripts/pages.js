  const pages = {
    report() {
      document.querySelectorAll("[data-sample]").forEach((host) => {
        const sample = DATA.samples[+host.dataset.sample];
        if (Object.keys(sample.attention).length) attentionViewer(host, sample.attention, sample.initial);
      });
      document.querySelectorAll("[data-align]").forEach((host) => drawAlignment(host, DATA.samples[+host.dataset.align].alignment));
      if (DATA.curve.length) drawCurve(document.getElementById("curve"), DATA.curve);
      if (DATA.heads) drawHeads(DATA.heads);
    },
    alignment() {
      drawAlignment(document.getElementById("words"),
        { matrix: DATA.word_matrix, links: DATA.links, src_words: DATA.src_words, tgt_words: DATA.tgt_words });
      attentionViewer(document.getElementById("subwords"), DATA.attention, DATA.policy);
    },
    text() {},  // text only: nothing to draw
    heads() {
      drawHeads(DATA.heads);
    },
    inspector() {
      drawHeadMaps(document.getElementById("weights"), document.getElementById("contributions"), DATA);
    },
    explorer() {
      explorer();
    },
    intervention() {  // each layer's map before and after the edit, side by side
      const host = document.getElementById("maps");
      DATA.before.forEach((before, layer) => {
        const pair = el("div", { class: "pair" });
        ["before", "after"].forEach((when) => {
          const box = el("div"), one = el("div", { "data-map": when + "-" + layer });
          box.append(el("h3", {}, "layer " + layer + ", " + when), one);
          pair.appendChild(box);
          drawHeatmap(one, DATA[when][layer], DATA.rows, DATA.cols);
        });
        host.appendChild(pair);
      });
    },
  };
  pages[DATA.page]();
  document.body.setAttribute("data-drawn", DATA.page);
