"""The explorer's "layers" panel: what each layer already knows about one sentence, by `Model.lens`
with the explorer's decoding settings, as the JSON the page draws.

A request (POST /api/lens, anything a browser or an attacker can send) is

    {"source": text, "top_k": how many tokens each decoder layer's cell lists (optional: TOP_K)}

and its answer is lens.json (`qkvmt.studies.lens.result.Lens.to_dict`) with the model's translation and,
for each encoder depth's translation, its words and which of them the model's translation lacks
(the page marks them):

    {"source", "translation", "tokens": y_1 .. y_m </s>,
     "encoder_depths": [{"layers": k, "translation", "words", "changed"}] for k = 1 .. L (L: the model),
     "decoder_layers": [{"layer", "top": [[{"token", "p"}] per position], "rank_of_own_token"}]}

The depths and layers are the answer's: the page lists none itself.
"""

from qkvmt.analysis.intervention import changed_words
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.results.html import plain

FIELDS = ("source", "top_k")
TOP_K = 3  # when a request leaves it out, as the page does: each cell's top token, two runners-up in its title
MOST = 10  # top_k at most: every cell's alternatives travel in the answer
KEPT = 4  # answers kept per sentence (one per top_k asked), oldest dropped first: memory stays bounded

PANEL = (
    "<h2>Layers</h2><p>What each layer already knows. The slider chooses how many of the encoder's layers "
    "the decoder reads (DecoderLens): the translation it makes from their output, the words the model's "
    "translation does not have marked; all of them is the model itself. The table reads each decoder layer's "
    "output through the final norm and the output embedding (logit lens): its top token and probability at each "
    "position of the model's translation, shaded where that layer already ranks the model's own token first "
    '(hover: the runners-up).</p><div id="lens"><p class="controls"><label for="lens-depth" id="lens-depth-label">'
    '</label><input type="range" id="lens-depth" min="1" max="1" value="1" step="1" disabled></p>'
    '<dl class="texts"><dt>from that depth</dt><dd id="lens-translation"></dd><dt>the model</dt>'
    '<dd id="lens-model"></dd></dl><p id="lens-error" class="error" role="alert" hidden></p>'
    '<div id="lens-table"></div></div>'
)


def top_k_of(body: dict) -> int:
    """The request's top_k (TOP_K when left out), every other field refused unless it is the source
    (session.fields checks that). A bad one: a one-line UserError, before anything is decoded."""
    unknown = [k for k in body if k not in FIELDS]
    if unknown:
        raise UserError(f"unknown field {unknown[0]!r}: a lens request has {', '.join(FIELDS)}")
    k = body.get("top_k", TOP_K)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MOST:
        raise UserError(f"top_k={k!r}: give a whole number from 1 to {MOST}, or leave it out for {TOP_K}")
    return k


def answer(model: Model, sentence, top_k: int, decode: dict) -> dict:
    """`Model.lens(source, top_k, **decode)` of `sentence` (session.Sentence: a source, already
    checked to fit the model's positions, and its forced pass) as the page draws it. Kept per
    sentence and top_k (KEPT): asked again, nothing is recomputed."""
    if top_k not in sentence.lenses:  # sentence.lenses keeps the KEPT latest
        r = model.lens(sentence.attention.source, top_k=top_k, **decode).to_dict()
        own = r["encoder_depths"][-1]["translation"]  # the last depth reads every layer: the model's translation
        for depth in r["encoder_depths"]:
            depth |= {"words": depth["translation"].split(), "changed": changed_words(own, depth["translation"])}
        sentence.lenses[top_k] = plain(r | {"translation": own})
    return sentence.lenses.latest(top_k)
