"""The patch study: in each sentence word A's key, its value or both, in every cross-attention
layer, are taken from a donor sentence in which A is replaced by another word, the substitute.

The substitute comes from the words of the split's source side that are one subword each,
alphabetic and not function words: those nearest A by the cosine of their source embeddings
(which puts a noun beside nouns, a verb beside verbs), leaving out forms of A itself (a shared
first four letters, or one a prefix of the other), words of the sentence, and words whose first
letter's case differs from A's (a German noun keeps to nouns). The first of them that the
model translates differently (its translation of the donor has another word where A's was, and
not A's) is taken; a sentence without one within `tries` candidates is left out.

A value holds what a position hands over, a key only how much it is looked at: the translation
should follow the donor when the value is patched, and stay when the key is.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from qkvmt.analysis.trace import trace
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs
from qkvmt.studies.kv import summary
from qkvmt.studies.kv.passes import Batch, Sentence, aligned, batches, positions, run
from qkvmt.studies.kv.row_edits import at_sites, patch_rows
from qkvmt.studies.kv.words import PATCH_OUTCOMES, content, patch_outcome, translated_words, where
from qkvmt.text.tokenizer import decode, encode

PARTS = ("keys", "values", "both")
AT = {"A": lambda s: s.a.position}


@dataclass(frozen=True)
class Donor:
    """A sentence with A replaced by the substitute, as the model translates it."""

    substitute: str
    ids: list[int]  # source ids: the sentence's, the substitute's one at A's position
    text: str
    translation: str
    target: str  # the substitute's translation (normal form)


def related(word: str, other: str) -> bool:
    """Forms of one word, as far as spelling tells: one is a prefix of the other, or they share
    their first four letters."""
    a, b = word.lower(), other.lower()
    return a.startswith(b) or b.startswith(a) or (len(a) >= 4 and a[:4] == b[:4])


class Vocabulary:
    """The words a substitute may be: the words of the source lines (so words of the source
    language, not the target's, which share the subword vocabulary) that are one subword each,
    alphabetic and not function words, with their unit-length source embeddings."""

    def __init__(self, model, lines: list[str]):
        words = sorted({w for line in lines for w in line.split() if content(w, model.meta.src_lang)})
        found = [(e[0], w) for w, e in zip(words, encode(model.tokenizer, words)) if len(e) == 1]
        self.ids, self.words = zip(*found) if found else ((), ())
        table = model.transformer.src_embed.tokens.weight.detach().float()  # (V, D)
        self.unit = table / table.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        self.index = torch.tensor(self.ids, dtype=torch.long, device=table.device)

    def nearest(self, s: Sentence, k: int) -> list[tuple[int, str]]:
        """The k candidates nearest A, nearest first: (id, word)."""
        sims = self.unit[self.index] @ self.unit[s.src_ids[s.a.position]]  # (candidates,)
        taken = {w.lower() for w in s.source.split()}
        out = []
        for j in sims.argsort(descending=True, stable=True).tolist():
            word = self.words[j]
            if related(word, s.a.text) or word.lower() in taken or word[0].isupper() != s.a.text[0].isupper():
                continue
            out.append((self.ids[j], word))
            if len(out) == k:
                break
        return out


def substituted(s: Sentence, token: int) -> list[int]:
    """The sentence's source ids with `token` at A's position."""
    return [*s.src_ids[: s.a.position], token, *s.src_ids[s.a.position + 1 :]]


def find_donors(
    model, sentences: list[Sentence], vocab: Vocabulary, cfg: DecodeConfig, tries: int
) -> list[Donor | None]:
    """Each sentence's donor, or None: candidates are tried in rounds, one search over every
    sentence still without a donor a round."""
    candidates = [vocab.nearest(s, tries) for s in sentences]
    donors: list[Donor | None] = [None] * len(sentences)
    for r in range(tries):
        todo = [k for k, c in enumerate(candidates) if donors[k] is None and len(c) > r]
        if not todo:
            break
        ids = [substituted(sentences[k], candidates[k][r][0]) for k in todo]
        texts = decode(model.tokenizer, ids)
        for k, x, text, own in zip(todo, ids, texts, model.translate(texts, cfg).ids):
            s, translation = sentences[k], decode(model.tokenizer, [own])[0]
            if encode(model.tokenizer, [text])[0] != x or where(s.a.target, translation) is not None:
                continue
            words = translated_words(aligned(model, text, own), model.meta.src_lang, model.meta.tgt_lang)
            there = [w for w in words if w.index == s.a.index and w.target != s.a.target]
            if there:
                donors[k] = Donor(candidates[k][r][1], x, text, translation, there[0].target)
    return donors


def donor_sites(model, src: Tensor) -> dict[tuple[int, str], Tensor]:
    """Every cross-attention layer's K and V of the donor sentences, (B, H, S, d_k) each."""
    t = model.transformer
    bos = torch.full((src.size(0), 1), t.cfg.bos_id, dtype=torch.long, device=src.device)
    traced = trace(t, src, bos)  # the keys and values need no target: one step of it
    return {(i, s): getattr(traced["cross", i], s) for i in range(len(t.decoder_layers)) for s in "kv"}


def patch_sites(model, sentences: list[Sentence], donors: list[Donor], part: str):
    layers = list(range(len(model.transformer.decoder_layers)))
    c = model.transformer.cfg

    def sites_of(batch: Batch) -> dict:
        src = build_inputs([donors[k].ids for k in batch.members], None, c.specials, c.max_positions).src
        taken = donor_sites(model, src.to(batch.src.device))
        at = positions(batch, sentences, AT["A"])
        return at_sites(part, layers, lambda layer, site: patch_rows(at, taken[layer, site]))

    return sites_of


def patch_study(
    model, sentences: list[Sentence], lines: list[str], cfg: DecodeConfig, tries: int, progress=None
) -> dict:
    """Every patch on every sentence with a donor (substitutes from the words of `lines`, the
    split's sources): each edit's summary, how many sentences had none, and each sentence's
    donor and edited translations."""
    found = find_donors(model, sentences, Vocabulary(model, lines), cfg, tries)
    chosen = [k for k, d in enumerate(found) if d is not None]
    studied, donors = [sentences[k] for k in chosen], [found[k] for k in chosen]
    if not studied:
        return {"conditions": [], "without_donor": len(sentences), "sentences": []}
    all_batches = batches(model, studied, cfg.max_tokens)
    before = run(model, studied, all_batches, lambda batch: {}, cfg, search=False)
    conditions, edited = [], {}
    for part in PARTS:
        passes = run(model, studied, all_batches, patch_sites(model, studied, donors, part), cfg)
        texts = decode(model.tokenizer, [p.edited for p in passes])
        outcomes = [patch_outcome(s.a.target, d.target, e) for s, d, e in zip(studied, donors, texts)]
        summed = summary.condition(model.tokenizer, studied, passes, before, outcomes, PATCH_OUTCOMES, AT)
        conditions.append({"patched": part, "layers": "every layer", **summed})
        edited[part] = list(zip(texts, outcomes))
        if progress:
            progress(f"patch {part}")
    per_sentence = [
        {
            "line": s.line,
            "A": s.a.text,
            "A_translation": s.a.target,
            "substitute": d.substitute,
            "substitute_translation": d.target,
            "donor_translation": d.translation,
            "edits": {part: list(found[k]) for part, found in edited.items()},
        }
        for k, (s, d) in enumerate(zip(studied, donors))
    ]
    return {"conditions": conditions, "without_donor": len(sentences) - len(studied), "sentences": per_sentence}
