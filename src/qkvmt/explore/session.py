"""What the explorer's server answers, as plain dicts: the page, one sentence's every view, the
word links of another policy, one head's walk for one query, each signal's deletion curve for
one target token (`deletion`), the translation under an edit of its attention (`what_if`) and
what each layer already knows (`lens_panel`); with a reference, its teacher-forced pass's maps
beside the translation's. Requests arrive as parsed JSON (anything a browser, or an attacker, can
send) and every field is checked here or in those modules: a bad one is a UserError whose one-line
message the page shows.

The numbers come from the API's own functions on the model's own translation (the subwords
decoding generated, forced as `Model.attention` forces them), so the page shows what
`qkvmt.load(...).attention(source)`, `.align(...)`, `.inspect(...)`, `.intervene(...)` and
`.lens(...)` return; the reference's maps are `.attention(source, reference)`'s.
"""

import threading
from dataclasses import dataclass, field

from qkvmt.alignment.directions import (
    AUTO,
    SOFT,
    Direction,
    both_ways,
    check_pair,
    check_unpaired,
    checked_method,
    pair_method,
)
from qkvmt.alignment.policy import DIRECTIONS, ROWS, cross_signals
from qkvmt.analysis.forced import ForcedPass, forced_attention
from qkvmt.analysis.inspection import inspect_head
from qkvmt.analysis.trace import KINDS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.explore import deletion, lazy_signals, lens_panel, what_if
from qkvmt.explore.bounded_cache import Kept
from qkvmt.model.inputs import fits
from qkvmt.results.html import escape, page, plain, texts_html
from qkvmt.results.sentence_alignment import SentenceAlignment
from qkvmt.text.metrics import sentence_scores
from qkvmt.text.sources import required_text
from qkvmt.text.tokenizer import encode, encode_target
from qkvmt.text.visible import visible_text

# What is kept, so that a click back recomputes nothing while memory stays bounded however long the
# explorer serves: the latest sentences (each its forced pass, every signal's maps), and per sentence
# the latest heads inspected and rows' deletion curves (what_if and lens_panel keep their own KEPT).
RECENT = 8
HEADS_KEPT = 16
CURVES_KEPT = 16
REFERENCES_KEPT = 4
# what `inspect` answers of a head's pass, beside the one query's walk
HEAD = ("kind", "layer", "head", "d_k", "query_tokens", "key_tokens", "weights", "scores", "contributions", "check")
# the JSON endpoints, POST /api/<name>, each a method of Explorer (app.py routes them, the page calls them)
ENDPOINTS = ("sentence", "align", "inspect", "curves", "intervene", "lens", "signal")


@dataclass
class Sentence:
    """One source's translation (the generated subwords) and its forced pass, with the signals
    computed so far (lazy_signals.FIRST, then each when asked for; and the checkpoint's full-context layer
    as Model.align reads it)."""

    ids: list[int]
    attention: ForcedPass
    heads: Kept = field(default_factory=lambda: Kept(HEADS_KEPT))  # (kind, layer, head) -> HeadPass
    curves: Kept = field(default_factory=lambda: Kept(CURVES_KEPT))  # target row -> its deletion curves
    edits: Kept = field(default_factory=lambda: Kept(what_if.KEPT))  # edit -> what_if.answer
    lenses: Kept = field(default_factory=lambda: Kept(lens_panel.KEPT))  # top_k -> lens_panel.answer
    references: Kept = field(default_factory=lambda: Kept(REFERENCES_KEPT))  # reference -> its forced pass


class Explorer:
    """A model (and optionally the reverse direction's, for symmetrized links) answering requests.
    One request runs at a time: a forced pass hooks the model's modules while it runs."""

    def __init__(
        self,
        model: Model,
        reverse: Model | None = None,
        method: str = AUTO,
        decode: dict | None = None,
        threshold: float | None = None,
    ):
        """`method` and `threshold` symmetrize the two models' links (pair_method resolves them)."""
        method, threshold = checked_method(method, threshold)
        self.model, self.decode = model, dict(decode or {})
        self.directions = self.method = self.threshold = None
        if reverse is not None:
            self.directions = Direction(model), Direction(reverse)
            check_pair(*self.directions, (model.paths[0], reverse.paths[0]))
            self.method, self.threshold = pair_method(method, threshold, *self.directions)
        else:
            check_unpaired(method, threshold, "", "a reverse model")
        self._lock = threading.Lock()
        self._recent = Kept(RECENT)  # source -> Sentence

    def page(self) -> str:
        """The explorer's page: one page of the shared template, which fetches everything else."""
        m, c = self.model, self.model.transformer.cfg
        shown = [("model", repr(m))] + ([("reverse", repr(self.directions[1].model))] if self.directions else [])
        body = (
            texts_html(shown) + '<form id="ask"><label>source<br><textarea id="source" rows="2" cols="80" '
            f'placeholder="a sentence in {escape(m.meta.src_lang)}"></textarea></label><br>'
            f"<label>reference (optional, {escape(m.meta.tgt_lang)}: scores, and its teacher-forced maps)<br>"
            '<input id="reference" size="80"></label> '
            '<button type="submit">Translate</button></form>'
            '<p id="error" class="error" role="alert" hidden></p><p id="busy" class="status"></p>'
            '<div id="result" hidden><dl id="texts" class="texts"></dl>'
            "<h2>Translation</h2><p>Each token shaded by its probability (hover: entropy, alternatives); "
            'click one to inspect its query.</p><div id="tokens"></div>'
            "<h2>Attention</h2><p>Dots on the cross map: the word links of the policy below. Click a row to "
            "inspect that query in the chosen head. With a reference, switch between the maps of the model's "
            "translation and those of the reference forced on the decoder (teacher forcing).</p>"
            '<div id="viewer"></div>'
            '<h2>Word alignment</h2><div id="policy" class="controls"></div><p id="pharaoh" class="mono"></p>'
            '<div id="words"></div><div id="both" hidden><h2>Symmetrized with the reverse model</h2>'
            '<p id="both-what"></p><div id="both-map"></div></div>'
            '<h2>Inspector</h2><div id="inspector"><p>Click a token and choose a head.</p></div>'
            "<h2>Deletion curves</h2><p>For one target token: delete the source tokens each signal ranks "
            "highest, a growing fraction of them, and see how much log p of the token drops (dashed: random "
            "orders). The higher a curve, the more the signal found what the prediction used.</p>"
            '<div id="deletion" class="controls"></div><div id="curves"></div>'
            f"{what_if.PANEL}{lens_panel.PANEL}</div>"
        )
        data = {
            "page": "explorer",
            "api": {name: f"api/{name}" for name in ENDPOINTS},
            "policy": m.default_policy.to_dict(),
            "choices": {
                "layer": list(range(c.decoder_layers)),
                "head": ["mean", *range(c.n_heads)],
                "rows": list(ROWS),
                "direction": list(DIRECTIONS),
                "signal": cross_signals(),
            },
            "what_if": what_if.choices(),
            "signals": lazy_signals.listed(),
        }
        return page("Attention explorer", body, data, fetches=True)

    def sentence(self, body) -> dict:
        """Every view of one sentence: texts and scores, tokens, maps of the signals computed so far
        (the others are computed when asked for: `signal`), the word links of the checkpoint's
        policy (or the one asked for), the symmetrized links."""
        source, reference = fields(body, "source", "reference")
        policy = body.get("policy")
        with self._lock:
            s = self._sentence(source)
            alignment = self._alignment(s, policy)  # first: the policy's own signal joins the maps
            a, forced = s.attention, None if reference is None else self._reference(s, reference)
            scores = None
            if reference is not None:
                (own,), signatures = sentence_scores([a.target], [reference])
                scores = own | {"signatures": signatures}
            return plain(
                {
                    "source": source,
                    "reference": reference,
                    "translation": a.target,
                    "scores": scores,
                    "token_scores": [t.to_dict() for t in a.token_scores],
                    "source_share": None if a.contributions is None else a.contributions.source_share,
                    "attention": lazy_signals.viewed(a, a.signals),
                    "reference_attention": None if forced is None else lazy_signals.viewed(forced, forced.signals),
                    "alignment": alignment,
                    "symmetrized": self._symmetrized(source, s),
                }
            )

    def align(self, body) -> dict:
        """The word links of another policy ({layer, head, rows, direction, signal})."""
        (source,) = fields(body, "source")
        with self._lock:
            return plain(self._alignment(self._sentence(source), body.get("policy")))

    def inspect(self, body) -> dict:
        """One head's Q, K, V for one query: {kind, layer, head, d_k, the head's whole maps, query}."""
        (source,) = fields(body, "source")
        kind, layer, head, row = (body.get(k) for k in ("kind", "layer", "head", "row"))
        if kind not in KINDS:
            raise UserError(f"kind={kind!r}: use one of {', '.join(KINDS)}")
        for name, value in (("layer", layer), ("head", head), ("row", row)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(f"{name}={value!r}: give a whole number")
        with self._lock:
            s = self._sentence(source)
            key = kind, layer, head
            if key not in s.heads:
                m = self.model
                s.heads[key] = inspect_head(m.transformer, m.tokenizer, source, s.ids, kind, layer, head)
            h = s.heads.latest(key)
            return plain({name: getattr(h, name) for name in HEAD} | {"query": h.query(row)})

    def curves(self, body) -> dict:
        """Each signal's deletion curve for one target token, computed on request: deletion.answer."""
        (source,), row = fields(body, "source"), deletion.row_of(body)
        with self._lock:
            return deletion.answer(self.model, self._sentence(source), row)

    def intervene(self, body) -> dict:
        """The translation under an edit of its attention, as Model.intervene gives it: what_if.answer."""
        (source,) = fields(body, "source")
        with self._lock:  # the edited search hooks the model's modules
            return what_if.answer(self.model, self._sentence(source), body, self.decode)

    def signal(self, body) -> dict:
        """One more signal's maps of the sentence (of the reference's forced pass, if one is given),
        computed the first time it is asked for: lazy_signals.answer."""
        (source, reference), name = fields(body, "source", "reference"), lazy_signals.name_of(body)
        with self._lock:
            s = self._sentence(source)
            if reference is None:
                s.attention = a = lazy_signals.ensure(self.model, s.attention, s.ids, name)
            else:
                s.references[reference] = a = lazy_signals.ensure(
                    self.model, self._reference(s, reference), reference, name
                )
            return lazy_signals.answer(a, name)

    def lens(self, body) -> dict:
        """What each layer already knows, as Model.lens gives it: lens_panel.answer."""
        (source,), top_k = fields(body, "source"), lens_panel.top_k_of(body)
        with self._lock:  # the lens hooks the model's layers
            return lens_panel.answer(self.model, self._sentence(source), top_k, self.decode)

    def _sentence(self, source: str) -> Sentence:
        """The translation and forced passes of `source`, kept for the RECENT latest sources asked for."""
        if source in self._recent:
            return self._recent.latest(source)
        m = self.model
        self._check_fits(encode(m.tokenizer, [source])[0], "source")
        ids = m.forced(source, None, **self.decode)
        self._check_fits(ids, "translation")
        attention = forced_attention(
            m.transformer, m.tokenizer, source, ids, m.meta.full_context_layer, lazy_signals.FIRST
        )
        self._recent[source] = s = Sentence(ids, attention)
        return s

    def _reference(self, s: Sentence, reference: str) -> ForcedPass:
        """The pass forced on `reference` (teacher forcing), as Model.attention(source, reference)
        makes it, kept with the sentence."""
        if reference not in s.references:
            m = self.model
            self._check_fits(encode_target(m.tokenizer, [reference])[0], "reference")
            source = s.attention.source
            s.references[reference] = forced_attention(
                m.transformer, m.tokenizer, source, reference, None, lazy_signals.FIRST
            )
        return s.references.latest(reference)

    def _check_fits(self, ids: list[int], what: str) -> None:
        n = self.model.transformer.cfg.max_positions
        if not fits(len(ids), n):
            raise UserError(
                f"the {what} has {len(ids)} subwords, but the model reads at most {n - 1} (max_positions={n}, "
                "one for </s>): give a shorter sentence; nothing is cut"
            )

    def _alignment(self, s: Sentence, policy) -> dict:
        if policy is not None and not isinstance(policy, dict):
            raise UserError('policy: give an object such as {"layer": 1, "head": "mean"}')
        policy = self.model.policy(policy)
        s.attention = lazy_signals.ensure(self.model, s.attention, s.ids, policy.signal)
        a = SentenceAlignment.of(s.attention, policy)
        return {
            "policy": a.policy,
            "matrix": a.word_matrix,
            "links": [list(x) for x in a.links],
            "pharaoh": a.pharaoh,
            "src_words": a.src_words,
            "tgt_words": a.tgt_words,
            "src_groups": a.src_word_groups,
            "tgt_groups": a.tgt_word_groups,
        }

    def _symmetrized(self, source: str, s: Sentence) -> dict | None:
        """Both models' links and their symmetrization, as align.py with reverse_ckpt_path= finds them."""
        if self.directions is None:
            return None
        forward, reverse = self.directions
        target = s.attention.target
        both = both_ways(forward, reverse, source, s.ids, target)
        if both is None:
            return {"error": "the translation does not fit the reverse model's positions: no symmetrized links"}
        return {
            "method": self.method,
            "threshold": self.threshold if self.method in SOFT else None,
            "src_words": source.split(),
            "tgt_words": target.split(),
            "policies": {"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()},
            "forward_links": sorted(both.forward_links),
            "reverse_links": sorted(both.reverse_links),
            "links": sorted(both.links(self.method, self.threshold)),
        }


def fields(body, *names: str) -> list[str | None]:
    """Text fields of a request: the first is required (non-blank), the others optional (blank is absent)."""
    if not isinstance(body, dict):
        raise UserError('the request body must be a JSON object, e.g. {"source": "Ein Mann fährt Fahrrad ."}')
    out = []
    for i, name in enumerate(names):
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            raise UserError(f"{name}: give text, not {type(value).__name__}")
        if i == 0:
            out.append(required_text(value, name))
        else:  # blank or invisible is absent; text that is there is checked as the first is (a lone surrogate)
            out.append(required_text(value, name) if value is not None and visible_text(value) else None)
    return out
