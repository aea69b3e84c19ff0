"""The Python API: `qkvmt.load(path)` and the model it returns, for notebooks and scripts.

    import qkvmt
    model = qkvmt.load("multi30k-de-en")    # a bundled model (qkvmt.pretrained()), a run folder, a .ckpt
    model.translate(["Ein Mann fährt Fahrrad ."])                      # Translations
    model.attention("Ein Mann fährt Fahrrad .")                        # every kind, layer and head
    model.align("Ein Mann fährt Fahrrad .", "A man rides a bike .")    # word links and Pharaoh
    model.inspect("Ein Mann fährt Fahrrad .", kind="cross", layer=-1, head=0)   # one head's Q, K, V
    model.intervene("Ein Hund rennt .", qkvmt.Swap(1, 2, "keys"))         # the translation with an edit
    model.lens("Ein Mann fährt Fahrrad .")                             # what each layer already knows

and over many sentences, or with a model of the other direction (qkvmt.studies.methods):

    model.evaluate(sources, references)                                # BLEU, chrF, and report.html
    model.align_both("Ein Hund rennt .", "multi30k-en-de")            # links of two models, symmetrized
    model.align_corpus(sources, targets)                               # a corpus's links, streamed as Pharaoh lines
    model.aer("rwth-deen-alignment", leaderboard=True)                 # every way to read links, scored on gold links
    model.heads(sources, references)                                   # each head's effect when masked
    model.faithfulness(sources, references)                            # which signal describes what the model did
    model.study(sources, "both")                                       # what keys and values are for
    model.lens_study(sources, references)                              # what each encoder depth knows
    model.sinks(sources, references)                                   # cross-attention's mass on </s> and punctuation

Every result is a typed object that shows itself in a notebook with the page its command
writes, and saves itself (`result.save(folder)`, or one file: `result.save("x.html")`). The
commands (scripts/*.py, through qkvmt.pipeline) call this same object, so a notebook and a
command give the same numbers for the same checkpoint and settings.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
from tokenizers import Tokenizer

from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.analysis.forced import checked_signals, forced_attention, one_pass_signals
from qkvmt.analysis.hooking import hooked
from qkvmt.analysis.inspection import inspect_head
from qkvmt.analysis.intervention import translate_with_and_without
from qkvmt.analysis.named_pass import hooks_by_name, lines_call, named_pass, names_wanted
from qkvmt.bundled import bundled_name, resolve
from qkvmt.decoding.engine import engine_for
from qkvmt.decoding.lines import RunningLines, running_lines, translate_ids
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.export.ctranslate2_engine import is_ctranslate2_folder, load_ctranslate2
from qkvmt.hf.languages import for_pair
from qkvmt.host.placement import placement
from qkvmt.loading import average_checkpoints, build_model, load_checkpoint
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.transformer import Transformer
from qkvmt.results.cache import Cache
from qkvmt.results.inspection import HeadInspection
from qkvmt.results.intervention import Intervention
from qkvmt.results.sentence_alignment import SentenceAlignment
from qkvmt.results.sentence_attention import SentenceAttention
from qkvmt.results.translations import Translations
from qkvmt.studies.lens.passes import lens
from qkvmt.studies.lens.result import Lens
from qkvmt.studies.methods import StudyMethods
from qkvmt.text.sources import required_text
from qkvmt.text.tokenizer import decode as detokenize
from qkvmt.text.tokenizer import encode_target


def load(
    path,
    average: list | None = None,
    device: str = "auto",
    precision: str = "32-true",
    src_lang: str | None = None,
    tgt_lang: str | None = None,
):
    """A trained model from `path` (text or any os.PathLike, a pathlib.Path):

    - the name of a model that ships with qkvmt, or an entry of `qkvmt.pretrained()` (which lists
      them) -> `Model`;
    - a folder from `qkvmt export format=safetensors` -> `Model`;
    - a checkpoint (.ckpt, from qkvmt train or qkvmt average) -> `Model`;
    - a training run's folder -> `Model` of its checkpoints/best.ckpt;
    - a folder from `qkvmt export format=ctranslate2` -> a CTranslate2Model, which translates;
    - a Hugging Face model folder (Marian, M2M100), or hf:ORG/NAME in huggingface_hub's cache -> `Model`.

    average: more checkpoint files; the model is then the average of `path` and them.
    device: where the model goes, as Lightning Fabric's accelerator ("auto": a GPU when there is one, or "cpu").
    precision: a Lightning precision for translation ("32-true", "bf16-mixed", ...). Float32 on the CPU is
    placed without Lightning (qkvmt.host.placement), every other choice by its Fabric.
    src_lang, tgt_lang: the pair a many-to-many model (M2M100) translates; by default the one its folder names.
    """
    path = resolve(path)
    if path.is_dir() and is_ctranslate2_folder(path):
        if average:
            raise UserError("average= needs checkpoints; an exported CTranslate2 folder holds one model already")
        return load_ctranslate2(path, device="cuda" if device == "auto" and torch.cuda.is_available() else "cpu")
    if path.is_dir() and (path / "checkpoints" / "best.ckpt").is_file():
        path = path / "checkpoints" / "best.ckpt"

    fabric = partial(placement, device, precision)  # once the files are read: see Model.from_checkpoints
    return Model.from_checkpoints([path, *map(resolve, average or [])], fabric, src_lang, tgt_lang)


class Model(StudyMethods):
    """A checkpoint's Transformer and tokenizer, placed by a Lightning Fabric (or, float32 on the CPU, a
    CPUPlacement, which does what that Fabric would); the methods over many sentences are StudyMethods'."""

    def __init__(self, transformer: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, paths: list[Path], fabric):
        self.transformer, self.tokenizer, self.meta = transformer, tokenizer, meta
        self.paths, self.fabric = paths, fabric

    @classmethod
    def from_checkpoints(
        cls, paths: list[Path], fabric, src_lang: str | None = None, tgt_lang: str | None = None
    ) -> "Model":
        """The model of one checkpoint file, or the average of several, placed by `fabric`: a
        Lightning Fabric or a CPUPlacement, or a function that makes one once the files are read (Lightning
        takes seconds to import, and a missing or bad file should not wait for it). src_lang, tgt_lang:
        the pair of a many-to-many model (qkvmt.hf.languages.for_pair)."""
        ckpt = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
        transformer, tokenizer = build_model(ckpt, paths[0])
        tokenizer, meta = for_pair(tokenizer, CheckpointMeta.from_dict(ckpt["qkvmt"]), src_lang, tgt_lang)
        fabric = fabric() if callable(fabric) else fabric
        return cls(fabric.to_device(transformer), tokenizer, meta, paths, fabric)

    def pair(self, src_lang: str | None = None, tgt_lang: str | None = None) -> "Model":
        """This many-to-many model translating src_lang -> tgt_lang (None keeps a side), without loading it
        again: the same weights, the tokenizer and forced target language of the new pair."""
        tokenizer, meta = for_pair(self.tokenizer, self.meta, src_lang, tgt_lang)
        return Model(self.transformer, tokenizer, meta, self.paths, self.fabric)

    def __repr__(self) -> str:
        c = self.transformer.cfg
        name = bundled_name(self.paths[0])
        what = (
            (f"the bundled model {name}" if name else self.paths[0])
            if len(self.paths) == 1
            else f"the average of {len(self.paths)} checkpoints"
        )
        return (
            f"<qkvmt.Model {self.meta.src_lang}->{self.meta.tgt_lang}: {c.encoder_layers}+{c.decoder_layers} layers, "
            f"d_model {c.d_model}, {c.n_heads} heads, {c.positions} positions; {what}>"
        )

    @property
    def default_policy(self) -> AlignmentPolicy:
        """How `align` reads links without a policy: the supervised head if trained with one."""
        c = self.transformer.cfg
        return AlignmentPolicy.default_for(self.meta, c.decoder_layers, c.n_heads)

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return next(self.transformer.parameters()).device

    def decoding(self, settings: DecodeConfig | None = None, **decode) -> DecodeConfig:
        """`settings` (default: the checkpoint's own, its run's test decoding) with the fields
        given as keywords taking precedence, e.g. decoding(beam_size=1). A many-to-many model's
        target language (qkvmt.hf.languages.for_pair) is forced first unless they force another."""
        return DecodeConfig.of_model(self.meta.decode, settings, decode)

    def translate(
        self, sentences, settings: DecodeConfig | None = None, progress: bool = False, hooks=None, **decode
    ) -> Translations:
        """Translations of `sentences` (a list of texts, or one text), in order; an empty text
        gives an empty translation. Decoding: `settings`, or the checkpoint's own, with any
        DecodeConfig field given as a keyword (beam_size=1, len_penalty=0.6, ...) overriding it.
        hooks: {name or glob: fn(activation, ctx)} run at every step of the search
        (qkvmt.analysis.hooking: `ctx` says the step, each row's sentence and beam, the positions)."""
        lines = [sentences] if isinstance(sentences, str) else list(sentences)
        cfg = self.decoding(settings, **decode)
        by_name = hooks_by_name(self.transformer, hooks)
        with (
            self.fabric.autocast(),
            hooked(self.transformer, by_name, call=lines_call(self.transformer, self.tokenizer, lines)),
        ):
            engine = engine_for(self.transformer, next(self.transformer.parameters()).device, cfg, len(lines))
            ids = translate_ids(self.transformer, self.tokenizer, lines, cfg, progress, engine)
        return Translations(detokenize(self.tokenizer, ids), lines, ids, asdict(cfg), str(engine))

    @contextlib.contextmanager
    def running(self, settings: DecodeConfig | None = None, **decode) -> Iterator[RunningLines]:
        """A search that lines join while it runs (continuous batching, as qkvmt serve's), decoding as
        `translate` would (`settings` and keywords alike), within the block: `join(lines, tags)` adds lines
        at its next step, `step()` advances every line a token and returns [(tag, translation)] of those
        done, each as soon as it is, whatever the others do; `len()` counts the lines not yet done.
        Each line's translation is the one `translate` gives it. No hook runs in it."""
        cfg = self.decoding(settings, **decode)
        with self.fabric.autocast(), running_lines(self.transformer, self.tokenizer, cfg) as lines:
            yield lines

    def hook_names(self, pattern: str | None = None) -> list[str]:
        """Every activation's name (qkvmt.model.hook_names), in the order a pass reaches them, or those a
        glob matches, e.g. hook_names("decoder.*.cross.v")."""
        return names_wanted(self.transformer, pattern)

    def run_with_cache(self, source, target=None, names=None, **decode) -> Cache:
        """One forced pass of `source` (a text or a list) over `target` (texts; None: the model's own
        translations, decoded with its settings and any DecodeConfig keyword), keeping the activations of
        `names` (a name, a glob or a list of them; None: every one) with the tokens of their axes."""
        return self.run_with_hooks(source, target, None, names, **decode)

    def run_with_hooks(self, source, target=None, hooks=None, names="logits", **decode) -> Cache:
        """One forced pass as run_with_cache's with `hooks`, {name or glob: fn(activation, ctx)}, each
        returning a tensor to take the activation's place or None; the Cache keeps `names` as the hooks
        left them (by default the logits)."""
        sources = [source] if isinstance(source, str) else list(source)
        for i, text in enumerate(sources):
            required_text(text, f"source[{i}]")
        wanted, by_name = names_wanted(self.transformer, names), hooks_by_name(self.transformer, hooks)
        if target is None:
            targets = self.translate(sources, **decode).ids
        else:
            texts = [target] if isinstance(target, str) else list(target)
            if len(texts) != len(sources):
                raise UserError(f"{len(sources)} sources and {len(texts)} targets: give one target per source")
            targets = encode_target(self.tokenizer, [required_text(t, f"target[{i}]") for i, t in enumerate(texts)])
        with self.fabric.autocast():
            return Cache.of(named_pass(self.transformer, self.tokenizer, sources, targets, wanted, by_name), sources)

    def forced(self, source: str, target: str | None, **decode) -> str | list[int]:
        """What a forced pass reads: the given target text, or the exact subwords the model
        generates for `source` with its own decoding settings (fields given as keywords win)."""
        if target is not None:
            return required_text(target, "target")
        return self.translate([source], **decode).ids[0]

    def attention(self, source: str, target: str | None = None, signals=None, **decode) -> SentenceAttention:
        """Every layer and head of the encoder self-, decoder self- and cross-attention of a
        forced pass over `target`, or over the model's own translation of `source` (decoded
        with the checkpoint's settings, and any DecodeConfig field given as a keyword), by each
        of `signals` (names of qkvmt.analysis.signals.SIGNALS; default: every signal of about
        one pass, qkvmt.analysis.forced.one_pass_signals(); the weights always)."""
        source = required_text(source, "source")
        names = checked_signals(one_pass_signals() if signals is None else signals)  # before the translation
        forced = self.forced(source, target, **decode)
        return SentenceAttention.of(forced_attention(self.transformer, self.tokenizer, source, forced, analyses=names))

    def align(
        self, source: str, target: str | None = None, policy: AlignmentPolicy | dict | None = None, **decode
    ) -> SentenceAlignment:
        """Word links of `source` and `target` (default: the model's translation) read from
        cross-attention by `policy`: an AlignmentPolicy, a dict of its fields (layer, head,
        rows, direction; validated), or None for `default_policy`."""
        source = required_text(source, "source")
        policy = self.policy(policy)
        forced = self.forced(source, target, **decode)
        attention = forced_attention(
            self.transformer, self.tokenizer, source, forced, self.meta.full_context_layer, analyses={policy.signal}
        )
        return SentenceAlignment.of(attention, policy)

    def policy(self, policy: AlignmentPolicy | dict | None = None) -> AlignmentPolicy:
        """`policy` as `align` reads it: a dict's fields over `default_policy`'s, validated
        (a bad value is a UserError naming it); None: `default_policy`."""
        if isinstance(policy, dict):
            c, known = self.transformer.cfg, asdict(self.default_policy)  # every field, drop too
            unknown = [k for k in policy if k not in known]
            if unknown:  # a field that would be ignored
                raise UserError(f"policy field {unknown[0]!r}: no such field; a policy has {', '.join(known)}")
            given = known | policy
            return AlignmentPolicy.validated(
                given["layer"],
                given["head"],
                given["rows"],
                given["direction"],
                c.decoder_layers,
                c.n_heads,
                given["signal"],
                given["drop"],
            )
        return policy or self.default_policy

    def inspect(
        self,
        source: str,
        target: str | None = None,
        kind: str = "cross",
        layer: int = -1,
        head: int = 0,
        top_k: int = 3,
        **decode,
    ) -> HeadInspection:
        """Q, K, V, scores, weights and output of one head (`kind`: encoder, decoder or cross;
        layers and heads from 0, a negative layer counting from the end)."""
        source = required_text(source, "source")
        forced = self.forced(source, target, **decode)
        return HeadInspection.of(
            inspect_head(self.transformer, self.tokenizer, source, forced, kind, layer, head, top_k)
        )

    def intervene(self, source: str, *edits, original: list[int] | None = None, **decode) -> Intervention:
        """`source` translated as it is and with `edits` (qkvmt.Swap, Zero, Patch, Knockout) applied
        to its attention at every step of the search: both translations, the changed words, each
        original token's log-probability change, and the cross-attention maps before and after.
        Decoding: the checkpoint's settings, with any DecodeConfig field given as a keyword.
        `original`: the unedited translation's subword ids (`Model.forced(source, None, **decode)`)
        where they are at hand, which saves its search."""
        source = required_text(source, "source")
        if not edits:
            raise UserError("intervene needs at least one edit: qkvmt.Swap, qkvmt.Zero, qkvmt.Patch or qkvmt.Knockout")
        with self.fabric.autocast():
            cfg = self.decoding(**decode)
            result = translate_with_and_without(self.transformer, self.tokenizer, source, edits, cfg, original)
        return Intervention.of(result)

    def lens(self, source: str, top_k: int = 3, **decode) -> Lens:
        """What each layer already knows: the translation the decoder makes from each encoder depth
        (DecoderLens), and the top_k tokens each decoder layer would predict at each position of the
        model's translation (logit lens). Decoding: the checkpoint's settings, with any DecodeConfig
        field given as a keyword."""
        source = required_text(source, "source")
        with self.fabric.autocast():
            return Lens.of(lens(self.transformer, self.tokenizer, source, self.decoding(**decode), top_k))
