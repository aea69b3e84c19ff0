"""The LightningDataModule: raw text -> the run's vocabulary (data.tokenizer) -> cached ids -> token-budget batches."""

import hashlib
import logging
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from qkvmt.alignment.reference import ALIGNERS, cached_links
from qkvmt.data.batching import Collate, TokenBudgetBatchSampler, TokenizedCorpus, round_up
from qkvmt.data.items import Labelled, Subset, extra_files, subword_labels
from qkvmt.data.texts import SplitTexts
from qkvmt.data.vocabularies import MIN_FREQUENCY, JointBPE, TrainingText, check_min_frequency
from qkvmt.errors import UserError
from qkvmt.hf.tokenizer_files import digest, keep_in_run
from qkvmt.setting_types import whole_number
from qkvmt.text.tokenizer import SPECIALS, Specials, load_or_train

log = logging.getLogger(__name__)


class TranslationDataModule(L.LightningDataModule):
    """Parallel data for one language pair.

    source: a callable taking `root` (TextFiles or HFDataset, wired as a Hydra partial).
    splits: the split names used for training, validation and test, e.g. test: test_2016_flickr.
    max_tokens: padded tokens per training batch on each device; eval_max_tokens for val/test.
    extra_train: more parallel text for training only, [{src: PATH, tgt: PATH}] (plain or .gz,
        line-parallel), e.g. the sentences of a gold alignment set without their links: it
        joins the training split for the BPE, the id cache and the batches. An entry's optional
        `repeat: N` puts its pairs N times into every epoch's batches (a small corpus weighted up,
        as fairseq's upsampling does); the tokenizer and the aligner still see each pair once.
    alignment_links: None, or how to symmetrize the reference aligner's word links of the
        training pairs (e.g. grow-diag-final-and): then each training batch carries them as
        `align`, (B, T, S) subword labels for alignment-supervised training. Computed once, cached in
        cache_dir; the aligner learns from the whole text in memory: over data.tokenizer_sample pairs is refused.
    aligner: the reference aligner that makes them (a name of qkvmt.alignment.reference.ALIGNERS).
    train, val, test: a split given by path, instead of splits[stage] of `source`: two line-parallel
        files [SRC_FILE, TGT_FILE] or one file of source<TAB>target lines (plain or .gz), streamed.
    tokenizer_sample: the tokenizer learns from at most this many training pairs, drawn with `seed`
        (all of a smaller corpus, as they are).
    length_multiple: every batch's source and target padded up to a multiple of this many tokens
        (qkvmt.data.batching.Collate), the token budget counting the padding; 1: none.
    tokenizer: the vocabulary the run makes (qkvmt.data.vocabularies, conf/data/tokenizer/); None: the joint BPE.
    """

    def __init__(
        self,
        source,
        root: str,
        src_lang: str,
        tgt_lang: str,
        splits: dict,
        cache_dir: str,
        vocab_size: int = 8000,
        min_frequency: int = MIN_FREQUENCY,
        max_tokens: int = 4096,
        eval_max_tokens: int = 8192,
        max_positions: int = 256,
        num_workers: int = 0,
        seed: int = 0,
        extra_train=(),
        alignment_links: str | None = None,
        aligner: str = "eflomal",
        length_multiple: int = 1,
        train=None,
        val=None,
        test=None,
        tokenizer_sample: int = 1_000_000,
        tokenizer=None,
    ):
        super().__init__()
        for name, value, least in (
            ("vocab_size", vocab_size, len(SPECIALS) + 1),
            ("min_frequency", min_frequency, 1),
            ("max_tokens", max_tokens, 1),
            ("eval_max_tokens", eval_max_tokens, 1),
            ("length_multiple", length_multiple, 1),
            ("tokenizer_sample", tokenizer_sample, 1),
        ):
            whole_number(f"data.{name}", value, least)
        self.source = source(root)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.splits = dict(splits)
        given = {stage: value for stage, value in (("train", train), ("val", val), ("test", test)) if value}
        extra = [extra_files(i, e) for i, e in enumerate(extra_train or ())]
        self.texts = SplitTexts(self.source, self.splits, given, extra, (src_lang, tgt_lang), tokenizer_sample, seed)
        self.cache_dir = Path(cache_dir)
        self.vocab_size, self.min_frequency = vocab_size, min_frequency
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens
        self.max_positions = max_positions
        self.length_multiple = length_multiple
        self.num_workers, self.seed = num_workers, seed
        self.alignment_links, self.aligner = alignment_links, aligner
        self.vocabulary = tokenizer if tokenizer is not None else JointBPE()
        check_min_frequency(self.vocabulary, min_frequency)
        self.tokenizer = None
        self.tokenizer_files: dict[str, bytes] | None = None  # a vocabulary kept as files (Marian's layout)
        # An imported model's (qkvmt.hf): its special ids, and what keys its id cache; else the BPE's own
        self.specials: Specials | None = None
        self.tokenizer_key: str | None = None
        self.links: list[np.ndarray | None] | None = None
        self.epoch_items: str | None = None  # a digest of the items an epoch is made of
        self.resume_items: str | None = None  # the same, as the checkpoint resumed from recorded it
        self.read_texts: dict[str, tuple[list[str], list[str]]] = {}
        self.corpora: dict[str, TokenizedCorpus] = {}
        self.resume_skip: dict[int, int] = {}  # after a resume: epoch -> batches of it already trained on

    def read(self, stage: str) -> tuple[list[str], list[str]]:
        """Sentences of one stage ('train', 'val', 'test') as lists, read once (validation and test are
        decoded whole); training itself streams its pairs (qkvmt.data.texts)."""
        if stage not in self.read_texts:
            self.read_texts[stage] = self.texts.read(stage)
        return self.read_texts[stage]

    def training_pairs(self) -> tuple[list[str], list[str]]:
        """Training sentences without empty pairs, all in memory (the reference aligner learns from them)."""
        if "train_nonempty" not in self.read_texts:
            self.training_repeats()  # checks the files, reports the empty pairs
            self.read_texts["train_nonempty"] = self.texts.training_pairs()
        return self.read_texts["train_nonempty"]

    def load_tokenizer(self, path: Path, given=None):
        """The run's tokenizer: loaded if the run already has one (resume), else made from train as
        data.tokenizer says, or `given` (the tokenizer of the model a run starts from, init_from), kept as
        the run's. `path`: where a tokenizers JSON goes (a set of files: the folder of that name without .json).
        Every file is read through first, so a bad line is found before anything is written."""
        self.read_through()
        if given is not None:
            self.tokenizer = load_or_train(path, None, self.vocab_size, self.min_frequency, given=given)
            return self.tokenizer
        made = self.vocabulary.make(self.training_text(), Path(path))
        self.tokenizer, self.tokenizer_files = made.tokenizer, made.files
        if made.files is not None:  # no JSON to key the id cache by
            self.tokenizer_key = f"hf-tokenizer {digest(made.files)} {self.src_lang}-{self.tgt_lang}"
        return self.tokenizer

    def training_text(self) -> TrainingText:
        """The training pairs as a vocabulary is made of them (at most data.tokenizer_sample, read only when
        one is trained), with the text's digest (and the pair's) for its record."""
        # Languages in a fixed order: a pair's joint vocabulary is the same for both directions,
        # so a de->en and an en->de model can be symmetrized word for word.
        return TrainingText(
            self.texts.vocabulary_sample,
            self.src_lang <= self.tgt_lang,
            self.vocab_size,
            self.min_frequency,
            self.texts.digest(),
        )

    def read_through(self) -> None:
        """Every file read through once and the training pairs counted, so bad input (and alignment
        links asked of a corpus too large to hold) is refused before anything is written."""
        pairs = len(self.training_repeats())
        self.texts.check()
        if self.alignment_links and pairs > self.texts.tokenizer_sample:
            raise UserError(
                f"module.alignment: its reference links learn from the whole training text in memory, here {pairs} "
                f"pairs, over data.tokenizer_sample={self.texts.tokenizer_sample}; train without them "
                "(module.alignment.weight=0), on fewer pairs, or raise data.tokenizer_sample if memory allows"
            )

    def imported_tokenizer(self, tokenizer, files: dict[str, bytes], model, out: Path):
        """An imported model's own tokenizer (qkvmt.hf), never a BPE of the data: its files kept in the run
        folder (tokenizer/), its special ids the model's (`model`: its ModelConfig; Marian's decoder starts
        with <pad>), and its id cache keyed by the files and the pair, so it never mixes with a BPE run's."""
        self.read_through()
        keep_in_run(files, out / "tokenizer")
        self.tokenizer, self.specials = tokenizer, model.specials
        self.tokenizer_key = f"hf-tokenizer {digest(files)} {self.src_lang}-{self.tgt_lang}"
        return tokenizer

    def corpus(self, stage: str) -> TokenizedCorpus:
        if stage not in self.corpora:
            if stage == "train":  # its digest is made as the files are read through, before the tokenizer
                pairs, text = self.texts.training(), self.texts.digest()
            else:
                pairs, text = self.texts.pairs(stage), None
            self.corpora[stage] = TokenizedCorpus.build(
                self.tokenizer, pairs, self.cache_dir, key=self.tokenizer_key, text=text
            )
        return self.corpora[stage]

    def training_links(self) -> list[np.ndarray | None]:
        """Subword (source, target) position pairs of each training pair's reference word links;
        None for a pair whose subwords do not group into the whitespace words the aligner saw."""
        if self.links is None:
            src, tgt = self.training_pairs()
            aligner = ALIGNERS[self.aligner]()
            words = cached_links(
                aligner, src, tgt, (self.src_lang, self.tgt_lang), self.alignment_links, self.cache_dir
            )
            self.links = subword_labels(self.tokenizer, self.corpus("train"), words, src, tgt)
            unlabelled = sum(x is None for x in self.links)
            log.info(
                "%s links (%s) label %d of %d training pairs%s",
                self.aligner,
                self.alignment_links,
                len(self.links) - unlabelled,
                len(self.links),
                f"; {unlabelled} whose subwords do not group into their words are left unlabelled"
                if unlabelled
                else "",
            )
        return self.links

    def prepare_data(self) -> None:
        # Runs on one process per node before the others read: builds the id caches (and the
        # aligner's links) once.
        for stage in ("train", "val", "test"):
            self.corpus(stage)
        if self.alignment_links:
            self.training_links()

    def train_dataloader(self) -> DataLoader:
        corpus = self.corpus("train")
        lengths = np.maximum(corpus.src_lens, corpus.tgt_lens) + 1  # + </s> or <s>
        keep = np.flatnonzero(lengths <= self.max_positions)
        if len(keep) < len(corpus):
            log.warning(
                "filtered %d training pairs longer than max_positions=%d tokens",
                len(corpus) - len(keep),
                self.max_positions,
            )
        over = int((lengths[keep] > self.max_tokens).sum())
        if over:
            log.warning(
                "data.max_tokens=%d is below the longest training pair (%d tokens): %d pairs get a batch of their own, "
                "over the budget; set data.max_tokens to at least %d",
                self.max_tokens,
                lengths[keep].max(),
                over,
                lengths[keep].max(),
            )
        # A repeated pair is several items of one epoch. Its copies have one length, so the
        # length-bucketed batches often put them together: a weight on the pair more than
        # separate exposures (as with fairseq's upsampling).
        keep = np.repeat(keep, self.training_repeats()[keep])
        self.epoch_items = hashlib.sha256(keep.tobytes()).hexdigest()[:16]
        sampler = TokenBudgetBatchSampler(
            round_up(lengths[keep], self.length_multiple),
            self.max_tokens,
            shuffle=True,
            seed=self.seed,
            position=self.position,
            **self._ranks(),
        )
        dataset = Labelled(corpus, self.training_links()) if self.alignment_links else corpus
        return self._loader(Subset(dataset, keep), sampler)

    def training_repeats(self) -> np.ndarray:
        """How often each training pair enters an epoch (counted in one pass over the files)."""
        return self.texts.training_repeats()

    def position(self) -> tuple[int, int]:
        """(epoch, batches to skip) for the training sampler as each epoch starts: the trainer's
        epoch (Lightning hands an epoch to a sampler, not to a batch_sampler; ours shuffles by
        (seed, epoch)), and after a resume the batches of that epoch already trained on."""
        if self.resume_items is not None and self.resume_items != self.epoch_items:
            # the skipped batches would be other batches than those trained on
            raise UserError(
                "the checkpoint was trained on other items per epoch than these settings give (data.extra_train's "
                "repeat, data.max_positions or the files changed): resume with its settings, or start a new run folder"
            )
        epoch = self.trainer.current_epoch if self.trainer is not None else 0
        return epoch, self.resume_skip.get(epoch, 0)

    def state_dict(self) -> dict:
        """The data position, saved with every checkpoint of a fit (Lightning restores step,
        optimizer and scheduler): the epoch and its batches processed, which on a save at the
        end of a batch counts that batch."""
        trainer = self.trainer
        if trainer is None or trainer.state.fn != "fit":
            return {}
        return {
            "epoch": trainer.current_epoch,
            "batches_done": trainer.fit_loop.epoch_loop.batch_progress.current.processed,
            "items": self.epoch_items,
        }

    def load_state_dict(self, state: dict) -> None:
        if state:
            self.resume_skip = {state["epoch"]: state["batches_done"]}
            self.resume_items = state.get("items")  # None from checkpoints older than the check

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader("val")

    def test_dataloader(self) -> DataLoader:
        return self.eval_dataloader("test")

    def eval_dataloader(self, stage: str) -> DataLoader:
        corpus = self.corpus(stage)
        lengths = np.maximum(corpus.src_lens, corpus.tgt_lens) + 1
        sampler = TokenBudgetBatchSampler(
            round_up(lengths, self.length_multiple), self.eval_max_tokens, shuffle=False, **self._ranks()
        )
        return self._loader(corpus, sampler)

    def _ranks(self) -> dict:
        t = self.trainer
        return {"rank": t.global_rank, "world_size": t.world_size} if t is not None else {}

    def _loader(self, dataset, sampler) -> DataLoader:
        return DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=Collate(self.specials or Specials.of(self.tokenizer), self.max_positions, self.length_multiple),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            # On a GPU, batches in page-locked memory: Lightning copies them up with non_blocking,
            # and a copy from ordinary (pageable) memory may first wait for the device's queue.
            pin_memory=self.trainer is not None and self.trainer.strategy.root_device.type == "cuda",
            # Its own generator: otherwise every new iterator (each epoch, each validation) draws
            # from the global RNG that dropout uses, and a resumed run's masks would shift.
            generator=torch.Generator().manual_seed(self.seed),
        )
