"""What `Model.lens` returns: what each layer already knows, shown and saved (lens.html, lens.json).

The numbers are qkvmt.studies.lens.passes's (LensPass); this module only draws and saves them: the
translation the decoder makes from each encoder depth (DecoderLens), and for each decoder layer
the tokens it would already predict at each position of the model's translation (logit lens),
the model's own token marked where that layer already ranks it first.
"""

from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.results.html import escape, page, texts_html
from qkvmt.results.result import Result
from qkvmt.studies.lens.passes import LensPass


class Lens(LensPass, Result):
    """One sentence read by DecoderLens and the logit lens, showing itself as a page."""

    def to_dict(self) -> dict:
        """lens.json."""
        return {
            "source": self.source,
            "encoder_depths": [{"layers": d + 1, "translation": t} for d, t in enumerate(self.depths)],
            "tokens": self.tokens,
            "decoder_layers": [
                {
                    "layer": layer,
                    "top": [
                        [{"token": t, "p": float(p)} for t, p in zip(tokens, probs)]
                        for tokens, probs in zip(self.top_tokens[layer], self.top_probs[layer])
                    ],
                    "rank_of_own_token": self.final_rank[layer].tolist(),
                }
                for layer in range(len(self.top_tokens))
            ],
        }

    def html(self) -> str:
        depths = texts_html([(f"encoder layers 1..{d + 1}", t) for d, t in enumerate(self.depths)])
        head = "<tr><th>decoder layer</th>" + "".join(f"<th>{escape(t)}</th>" for t in self.tokens) + "</tr>"
        rows = "".join(
            f"<tr><th>{layer}</th>"
            + "".join(
                f'<td class="{"own" if rank == 0 else ""}" title="{escape(self.tokens[i])} is ranked {rank + 1}">'
                f"{escape(self.top_tokens[layer][i][0])} {self.top_probs[layer][i][0]:.2f}</td>"
                for i, rank in enumerate(self.final_rank[layer].tolist())
            )
            + "</tr>"
            for layer in range(len(self.top_tokens))
        )
        body = (
            texts_html([("source", self.source)])
            + "<h2>The translation from each encoder depth (DecoderLens)</h2>"
            + "<p>The decoder reads the output of the encoder's first layers instead of its last.</p>"
            + depths
            + "<h2>What each decoder layer would predict (logit lens)</h2>"
            + "<p>Each layer's output through the final norm and the output embedding: its top token and "
            + "probability at each position of the model's translation; shaded where it is already the "
            + "model's own token.</p>"
            + f'<div class="scroll"><table class="plain lens">{head}{rows}</table></div>'
        )
        return page("Lens", body, {"page": "text"})

    def files(self) -> dict:
        return {
            "lens.json": lambda path: write_json(Path(path), self.to_dict()),
            "lens.html": lambda path: write_text(Path(path), self.html()),
        }
