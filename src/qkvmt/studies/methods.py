"""qkvmt.Model's methods over many sentences or two models: each checks what it is given and hands
the model to its module in this package, which returns a result of qkvmt.results. qkvmt.api.Model
inherits them; the commands call them and nothing below them."""

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from qkvmt.alignment.directions import check_unpaired, checked_method
from qkvmt.alignment.links import GoldAlignments, read_gold
from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.bundled import resolve
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.results.aer import AERReport
from qkvmt.results.corpus_alignment import CorpusAlignment
from qkvmt.results.evaluation import Evaluation
from qkvmt.results.heads import HeadsReport
from qkvmt.results.two_way_alignment import TwoWayAlignment
from qkvmt.studies.aer import Pairs, aer
from qkvmt.studies.checks import report_signals, sentences
from qkvmt.studies.corpus import align_corpus
from qkvmt.studies.evaluation import Comparison, evaluate
from qkvmt.studies.faithfulness.corpus import faithfulness
from qkvmt.studies.faithfulness.result import Faithfulness
from qkvmt.studies.heads.corpus import heads
from qkvmt.studies.kv.corpus import kv_study
from qkvmt.studies.kv.result import KeyValueStudy
from qkvmt.studies.lens.corpus import lens_study
from qkvmt.studies.lens.study import LensStudy
from qkvmt.studies.patching.corpus import patch_study
from qkvmt.studies.patching.result import PatchStudy
from qkvmt.studies.sinks.corpus import sinks
from qkvmt.studies.sinks.result import SinkMass
from qkvmt.studies.two_way import aer_both, directions, sentence_both
from qkvmt.text.metrics import DEFAULT_TOKENIZE, bleu_metric
from qkvmt.text.significance import checked_settings
from qkvmt.text.sources import required_text

FIVE_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5)


def one_model(symmetrize: str, threshold: float | None) -> None:
    """symmetrize= and threshold= without a reverse model, where they cannot take effect: a UserError."""
    check_unpaired(*checked_method(symmetrize, threshold), "", "reverse=<a model of the other direction>")


class StudyMethods:
    """qkvmt.Model's methods over many sentences or two models. A part of Model (which inherits it):
    they read its transformer, tokenizer, meta, paths and fabric, and its methods of one sentence."""

    def _settings(self, settings: DecodeConfig | None, decode: dict, **defaults) -> DecodeConfig:
        """`settings` with the fields `decode` gives over them, recorded as given (translate forces a
        many-to-many model's language itself); without settings, the checkpoint's own with `defaults`."""
        return self.decoding(**defaults | decode) if settings is None else DecodeConfig.merged(asdict(settings), decode)

    def _other_model(self, other):
        """`other` as a model: itself, or the checkpoint or bundled model it names, placed as this one."""
        return other if isinstance(other, StudyMethods) else type(self).from_checkpoints([resolve(other)], self.fabric)

    def align_both(
        self,
        source: str,
        reverse,
        target: str | None = None,
        rows: str = "predicting",
        signal: str = "weights",
        symmetrize: str = "auto",
        threshold: float | None = None,
        **decode,
    ) -> TwoWayAlignment:
        """Word links of `source` and `target` (default: this model's translation) by this model and
        `reverse`, a model of the other direction (or its path or bundled name), each reading its
        own default layer and head target→source (`rows`, `signal`), combined by `symmetrize`
        (auto: soft-mean for two supervised heads, else grow-diag-final-and; `threshold`: a soft
        method's least weight)."""
        source = required_text(source, "source")
        forward, back = directions(self, self._other_model(reverse), rows, signal)
        return sentence_both(forward, back, source, target, symmetrize, threshold, **decode)

    def align_corpus(
        self,
        src_lines,
        tgt_lines,
        reverse=None,
        policy: AlignmentPolicy | dict | None = None,
        rows: str = "predicting",
        signal: str = "weights",
        symmetrize: str = "auto",
        threshold: float | None = None,
        batch_tokens: int = 16384,
        chunk_pairs: int = 4096,
        reference_aligner: str | None = None,
        reference_symmetrization: str = "grow-diag-final-and",
    ) -> CorpusAlignment:
        """The links of every pair of `src_lines` and `tgt_lines` (line-parallel), streamed: iterate
        the result for one Pharaoh line per pair, or save it. One model reads by `policy` (default:
        its default policy reading `rows` and `signal`); with `reverse`, as align_both. Batches of
        `batch_tokens` padded tokens; `chunk_pairs` pairs read at a time. `reference_aligner`
        (eflomal) aligns the same pairs beside, reading the lines again (lists or files)."""
        reading = {"rows": rows, "signal": signal}
        if reverse is not None and policy is not None:
            raise UserError("policy= is one model's reading: with reverse=, each model reads its own default head")
        if reverse is None:
            one_model(symmetrize, threshold)
            one, other = self.policy(reading if policy is None else policy), None
        else:
            one, other = None, self._other_model(reverse)
        reference = (reference_aligner, reference_symmetrization)
        args = (symmetrize, threshold, batch_tokens, chunk_pairs, reference)
        return align_corpus(self, src_lines, tgt_lines, other, one, reading, *args)

    def aer(
        self,
        gold_dir,
        reverse=None,
        gold_first: str = "de",
        dev: int = 0,
        rows: str = "predicting",
        signal: str = "weights",
        symmetrize: str = "auto",
        threshold: float | None = None,
        leaderboard: bool = False,
        leaderboard_signals: list[str] | None = None,
        reference_aligner: str | None = None,
        reference_symmetrization: str = "grow-diag-final-and",
        training_pairs: Pairs | Callable[[], Pairs] | None = None,
    ) -> AERReport:
        """AER against the gold links in `gold_dir` (the RWTH layout: src, tgt, alignment.talp;
        `gold_first`: the language its first index counts); the first `dev` pairs choose the best.
        One model: every signal × layer × head × rows × direction (`signal`'s and the default's;
        with `leaderboard`, every signal of about one pass and `leaderboard_signals`), beside
        `reference_aligner` learning from `training_pairs`. With `reverse`: each direction and
        every symmetrization, as align_both reads them."""
        if reverse is None:
            one_model(symmetrize, threshold)
            reference = (reference_aligner, reference_symmetrization)
            return aer(
                self, gold_dir, gold_first, dev, signal, leaderboard, leaderboard_signals, reference, training_pairs
            )
        given = [
            k
            for k, v in (
                ("leaderboard", leaderboard),
                ("leaderboard_signals", leaderboard_signals),
                ("reference_aligner", reference_aligner),
            )
            if v
        ]
        if given:
            raise UserError(f"{given[0]}= scores one model's own heads: drop it, or drop reverse=")
        forward, back = directions(self, self._other_model(reverse), rows, signal)
        return aer_both(forward, back, gold_dir, gold_first, dev, symmetrize, threshold)

    def evaluate(
        self,
        sources,
        references,
        tokenized_references=None,
        samples: int = 8,
        signals: list[str] | None = None,
        curve: list[dict] = (),
        heads: HeadsReport | None = None,
        name: str = "sentences",
        settings: DecodeConfig | None = None,
        progress: bool = False,
        precision: str | None = None,
        bleu_tokenize: str = DEFAULT_TOKENIZE,
        baseline=None,
        baseline_name: str = "baseline",
        significance: dict | None = None,
        **decode,
    ) -> Evaluation:
        """`sources` translated and scored against `references` by sacreBLEU (BLEU with the tokenizer
        `bleu_tokenize`, chrF, lowercased BLEU; tokenized lowercased BLEU against
        `tokenized_references`), signatures included, and each sentence's own BLEU and chrF; the
        report shows the first `samples` sentences' attention by `signals` (default every one),
        beside a validation `curve` and a `heads` report where given. Decoding: `settings`, or the
        checkpoint's own, with DecodeConfig keywords; `precision`: how metrics name it (the Fabric's).
        `baseline`: a second system, as its translations of `sources` (a list) or as a model (a
        Model, a checkpoint or a bundled name, decoding with its own settings), compared by sacreBLEU's
        paired tests and named `baseline_name` (a model: its path); `significance`: the tests' settings
        (tests, samples, seed; qkvmt.text.significance)."""
        src, refs = sentences(sources, "sources"), sentences(references, "references")
        tok = None if tokenized_references is None else sentences(tokenized_references, "tokenized_references")
        report = (samples, report_signals(signals))
        bleu_metric(bleu_tokenize)  # refused before any translating where sacreBLEU has no such tokenizer
        run = {"precision": precision, "progress": progress, "bleu_tokenize": bleu_tokenize}
        settings = self._settings(settings, decode)
        compare = None if baseline is None else self._comparison(baseline, baseline_name, src, significance, progress)
        return evaluate(self, src, refs, settings, name, tok, report, curve, heads, run, compare)

    def _comparison(self, baseline, name: str, sources: list[str], significance, progress: bool) -> Comparison:
        """A second system's translations of `sources`, with the paired tests' settings, checked."""
        checked = checked_settings(significance or {})  # before translating: nothing left to fail after it
        tests, samples, seed = checked["tests"], checked["samples"], checked["seed"]
        if isinstance(baseline, (list, tuple)):
            return Comparison(sentences(baseline, "baseline"), name, tests, samples, seed)
        try:
            other = self._other_model(baseline)
        except UserError as e:  # a text meant as a model that names none, say
            raise UserError(f"baseline={baseline!r}: give its translations as a list, or a model ({e})") from None
        pairs = (f"{m.meta.src_lang}->{m.meta.tgt_lang}" for m in (other, self))
        theirs, ours = pairs
        if theirs != ours:
            raise UserError(f"baseline {baseline} translates {theirs}, this model {ours}: give a baseline of {ours}")
        name = str(other.paths[0]) if other.paths else "baseline"
        return Comparison(other.translate(sources, progress=progress), name, tests, samples, seed)

    def heads(
        self,
        sources,
        references,
        gold=None,
        gold_first: str = "de",
        prune_points: int = 10,
        profile_sentences: int = 200,
        name: str = "sentences",
        settings: DecodeConfig | None = None,
        **decode,
    ) -> HeadsReport:
        """Each head masked alone while `sources` are translated and scored against `references`
        (and with `gold`, a gold folder or GoldAlignments, each cross head's AER), the pruning curve
        in `prune_points` steps, what each head looks at on the first `profile_sentences` pairs.
        Decoding: `settings`, or the checkpoint's own made greedy, with DecodeConfig keywords."""
        settings = self._settings(settings, decode, beam_size=1)
        if gold is not None and not isinstance(gold, GoldAlignments):
            gold = read_gold(Path(gold), self.meta.src_lang, self.meta.tgt_lang, gold_first)
        src, refs = sentences(sources, "sources"), sentences(references, "references")
        return heads(self, src, refs, settings, gold, prune_points, profile_sentences, name)

    def faithfulness(
        self,
        sources,
        references,
        n: int = 500,
        signals: list[str] | None = None,
        levels=FIVE_LEVELS,
        targets_per_sentence: int = 3,
        random_draws: int = 3,
        seed: int = 0,
        aer_file=None,
        name: str = "sentences",
        target: str = "reference",
    ) -> Faithfulness:
        """Every signal's readings (`signals`: default all with cross-attention maps) on the first n
        pairs that fit, forcing each reference (target="reference") or the model's own translation
        (target="own"; references may then be empty): deletion and sufficiency of the top source
        tokens at each of `levels`, for `targets_per_sentence` seeded target tokens, against
        `random_draws` random orders; `aer_file`: an aer.json with a leaderboard, whose AER each
        reading shows."""
        draws = {"targets_per_sentence": targets_per_sentence, "random_draws": random_draws, "seed": seed}
        src, refs = sentences(sources, "sources"), sentences(references, "references")
        return faithfulness(self, src, refs, name, n, signals, levels, draws, aer_file, target)

    def study(
        self, sources, study: str = "both", n: int = 300, substitutes: int = 5, name: str = "sentences", **decode
    ) -> KeyValueStudy:
        """What keys and values are for, on the first n of `sources` with two translated words: two
        words swap their cross-attention keys, values or both (study="swap"), one word's come from a
        sentence with `substitutes` candidates in its place (study="patch"), or both."""
        return kv_study(self, sentences(sources, "sources"), study, n, substitutes, name, **decode)

    def lens_study(self, sources, references, n: int = 300, name: str = "sentences", **decode) -> LensStudy:
        """The first n of `sources` translated with the decoder reading each encoder depth in turn
        (DecoderLens), each depth scored against `references` and against the model's own."""
        src, refs = sentences(sources, "sources"), sentences(references, "references")
        return lens_study(self, src, refs, n, name, **decode)

    def sinks(self, sources, references, n: int = 1000, name: str = "sentences", **decode) -> SinkMass:
        """Where cross-attention's mass goes on the first n pairs of `sources` and `references` that
        have both: each layer's and head's mean share of a row's weight on `</s>`, on punctuation and
        on both, forced on the references and over the model's own translations (decoded with the
        checkpoint's settings, with any DecodeConfig field given as a keyword); and each encoder and
        decoder self-attention layer's and head's share on the query's own position."""
        src, refs = sentences(sources, "sources"), sentences(references, "references")
        return sinks(self, src, refs, n, name, **decode)

    def patch_study(
        self,
        clean,
        corrupt,
        names="decoder.*.cross.v",
        metric="log_prob",
        method: str = "patching",
        unequal: str = "error",
        batch_size: int = 256,
        check: int = 10,
        **decode,
    ) -> PatchStudy:
        """Causal tracing: for pairs of sources that differ in a word (`clean`, `corrupt`: lists of texts
        of as many tokens; unequal="skip" leaves out the others), the share of the clean–corrupt difference
        in `metric` that patching each slice (each head and position of each activation `names`, a name or
        glob or a list) from clean into corrupt restores. metric: "log_prob" (of the clean translation's
        token where the translations first differ), "logit_diff" (its logit minus the corrupt one's), or
        fn(logits, clean_token, corrupt_token) -> values. method="attribution": the gradient estimate over
        every pair, real patching over the first `check` only; both report their correlation. batch_size:
        patched passes run together. Decoding (for the translations): the checkpoint's, with keywords."""
        with self.fabric.autocast():
            return patch_study(self, clean, corrupt, names, metric, method, unequal, batch_size, check, **decode)
