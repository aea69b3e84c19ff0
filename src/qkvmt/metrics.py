"""Corpus metrics from sacreBLEU, always reported with their signatures."""

import sacrebleu


def score(hypotheses: list[str], references: list[str]) -> dict:
    """Cased, detokenized BLEU and chrF, plus lowercased BLEU; sacreBLEU's default settings."""
    bleu = sacrebleu.metrics.BLEU()
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True)
    chrf = sacrebleu.metrics.CHRF()
    refs = [references]
    b, blc, c = bleu.corpus_score(hypotheses, refs), bleu_lc.corpus_score(hypotheses, refs), chrf.corpus_score(hypotheses, refs)
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_lc": blc.score,
        "signatures": {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature()), "bleu_lc": str(bleu_lc.get_signature())},
    }
