"""Corpus metrics from sacreBLEU, always reported with their signatures."""

import functools

import sacrebleu
from sacrebleu.tokenizers.tokenizer_base import BaseTokenizer

from qkvmt.errors import UserError


def _tokenizer_classes(cls: type = BaseTokenizer):
    for sub in cls.__subclasses__():
        yield sub
        yield from _tokenizer_classes(sub)


def forgets_tokenized_lines(fn):
    """`fn`, emptying sacreBLEU's memo of tokenized lines when it returns.

    Each sacreBLEU tokenizer memoizes its calls in a class-wide lru_cache of 2**16 lines, keyed
    by the tokenizer object and the line. A training run scores a new set of translations at
    every validation, so the memo kept every hypothesis and reference it had scored, and each
    scoring's tokenizers, until it filled: 9 MB more heap in use in each CPU-recipe process
    every 1,000 steps (CHANGELOG.md, the CPU recipe). A split is scored in one call, so emptying
    the memo after it costs nothing."""

    @functools.wraps(fn)
    def scored(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            for cls in _tokenizer_classes():
                memo = vars(cls).get("__call__")
                if hasattr(memo, "cache_clear"):
                    memo.cache_clear()

    return scored


DEFAULT_TOKENIZE = "13a"  # sacreBLEU's own default for BLEU


def bleu_metric(tokenize: str = DEFAULT_TOKENIZE, **options) -> sacrebleu.metrics.BLEU:
    """sacreBLEU's BLEU with the tokenizer `tokenize` (metrics.bleu_tokenize; the signature's tok:),
    refused in one line where sacreBLEU has no such tokenizer or cannot load it here."""
    names = sacrebleu.metrics.BLEU.TOKENIZERS
    if tokenize not in names:
        raise UserError(
            f"metrics.bleu_tokenize={tokenize!r}: sacreBLEU has no such tokenizer; use one of {', '.join(names)}"
        )
    try:
        return sacrebleu.metrics.BLEU(tokenize=tokenize, **options)
    except (ImportError, OSError, RuntimeError) as e:  # a tokenizer's own package or model (mecab, SentencePiece)
        raise UserError(f"metrics.bleu_tokenize={tokenize}: sacreBLEU cannot load it here ({e})") from None


@forgets_tokenized_lines
def score(hypotheses: list[str], references: list[str], bleu_tokenize: str = DEFAULT_TOKENIZE) -> dict:
    """Cased, detokenized BLEU and chrF, plus lowercased BLEU; sacreBLEU's default settings but for
    BLEU's tokenizer, `bleu_tokenize`."""
    if not hypotheses:  # sacreBLEU's corpus scores index the first sentence's statistics
        raise UserError("no sentences to score: give at least one translation and its reference")
    bleu = bleu_metric(bleu_tokenize)
    bleu_lc = bleu_metric(bleu_tokenize, lowercase=True)
    chrf = sacrebleu.metrics.CHRF()
    refs = [references]
    b, blc, c = (
        bleu.corpus_score(hypotheses, refs),
        bleu_lc.corpus_score(hypotheses, refs),
        chrf.corpus_score(hypotheses, refs),
    )
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_lc": blc.score,
        "signatures": {
            "bleu": str(bleu.get_signature()),
            "chrf": str(chrf.get_signature()),
            "bleu_lc": str(bleu_lc.get_signature()),
        },
    }


@forgets_tokenized_lines
def sentence_scores(
    hypotheses: list[str], references: list[str], bleu_tokenize: str = DEFAULT_TOKENIZE
) -> tuple[list[dict], dict]:
    """Each sentence's own BLEU (effective order, as sacreBLEU's sentence_bleu) and chrF, and
    their signatures."""
    if not hypotheses:
        return [], {}  # sacreBLEU can sign a metric only once it has scored something
    bleu, chrf = bleu_metric(bleu_tokenize, effective_order=True), sacrebleu.metrics.CHRF()
    scores = [
        {"bleu": bleu.sentence_score(h, [r]).score, "chrf": chrf.sentence_score(h, [r]).score}
        for h, r in zip(hypotheses, references)
    ]
    return scores, {"sentence_bleu": str(bleu.get_signature()), "sentence_chrf": str(chrf.get_signature())}


@forgets_tokenized_lines
def score_tokenized_lowercased(hypotheses: list[str], tokenized_references: list[str], lang: str) -> dict:
    """BLEU as Multi30k papers report it: against the dataset's lowercased, punctuation-normalised,
    Moses-tokenized references, with hypotheses prepared the same way by sacremoses and no
    further tokenization by sacreBLEU."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    norm, tok = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    prepared = [tok.tokenize(norm.normalize(h), return_str=True, escape=True).lower() for h in hypotheses]
    bleu = sacrebleu.metrics.BLEU(tokenize="none", lowercase=True)
    return {"bleu": bleu.corpus_score(prepared, [tokenized_references]).score, "signature": str(bleu.get_signature())}
