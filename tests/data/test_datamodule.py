"""The DataModule's training pairs: the training split plus data.extra_train files."""

import gzip
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from hydra.utils import instantiate

import qkvmt.data.datamodule
from qkvmt.errors import UserError
from tests.conftest import compose_train, tiny_overrides, write_corpus

EXTRA_DE = ["ein haus am see", "zwei hunde im park", "der mann liest"]
EXTRA_EN = ["a house by the lake", "two dogs in the park", "the man reads"]


def datamodule(tmp_path, *overrides):
    corpus = write_corpus(tmp_path / "corpus")
    cfg = compose_train(*tiny_overrides(corpus, tmp_path / "run"), *overrides)
    return instantiate(cfg.data)


def write_extra(tmp_path, de=EXTRA_DE, en=EXTRA_EN):
    (tmp_path / "extra.de.gz").write_bytes(gzip.compress("".join(x + "\n" for x in de).encode()))
    (tmp_path / "extra.en").write_text("".join(x + "\n" for x in en))
    return tmp_path / "extra.de.gz", tmp_path / "extra.en"


def test_extra_train_files_join_the_training_pairs_and_the_id_cache(tmp_path):
    de, en = write_extra(tmp_path)
    dm = datamodule(tmp_path, f"data.extra_train=[{{src:{de},tgt:{en}}}]")
    src, tgt = dm.training_pairs()
    assert len(src) == 300 + 3 and (src[-3:], tgt[-3:]) == (EXTRA_DE, EXTRA_EN)
    dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert len(dm.corpus("train")) == 303
    assert dm.read("val") == datamodule(tmp_path / "plain").read("val")  # validation is untouched


def test_extra_train_files_that_are_not_line_parallel_are_refused_naming_both(tmp_path):
    de, en = write_extra(tmp_path, en=EXTRA_EN[:2])
    dm = datamodule(tmp_path, f"data.extra_train=[{{src:{de},tgt:{en}}}]")
    with pytest.raises(UserError, match=f"{de} has 3 lines, {en} has 2"):
        dm.training_pairs()


def test_an_extra_train_entry_without_src_and_tgt_is_refused(tmp_path):
    with pytest.raises(Exception) as e:
        datamodule(tmp_path, "data.extra_train=[{source:a.de,target:a.en}]")
    cause = e.value
    while not isinstance(cause, UserError):
        cause = cause.__cause__
    assert "data.extra_train[0]" in str(cause) and "{src:PATH,tgt:PATH}" in str(cause)


def test_repeat_puts_an_extra_file_several_times_into_each_epoch_but_once_into_tokenizer_and_cache(tmp_path):
    de, en = write_extra(tmp_path, de=["ein boot", EXTRA_DE[0], *EXTRA_DE[1:]], en=["", EXTRA_EN[0], *EXTRA_EN[1:]])
    dm = datamodule(tmp_path, f"data.extra_train=[{{src:{de},tgt:{en},repeat:4}}]")
    src, _ = dm.training_pairs()  # the pair with an empty side is left out
    assert len(src) == 303 and src.count(EXTRA_DE[0]) == 1  # what BPE and the aligner learn from
    dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert len(dm.corpus("train")) == 303
    loader = dm.train_dataloader()
    seen = Counter(int(loader.dataset.keep[i]) for batch in loader.batch_sampler for i in batch)
    assert [seen[i] for i in range(300, 303)] == [4, 4, 4]
    assert set(seen[i] for i in range(300)) == {1}


def test_a_resume_whose_epoch_would_hold_other_items_is_refused(tmp_path):
    de, en = write_extra(tmp_path)
    trained = datamodule(tmp_path / "a", f"data.extra_train=[{{src:{de},tgt:{en},repeat:4}}]")
    trained.load_tokenizer(tmp_path / "a" / "run" / "tokenizer.json")
    trained.train_dataloader()
    state = {"epoch": 0, "batches_done": 2, "items": trained.epoch_items}
    for repeat, refused in ((4, False), (2, True)):
        dm = datamodule(tmp_path / f"r{repeat}", f"data.extra_train=[{{src:{de},tgt:{en},repeat:{repeat}}}]")
        dm.load_tokenizer(tmp_path / f"r{repeat}" / "run" / "tokenizer.json")
        dm.load_state_dict(state)
        sampler = dm.train_dataloader().batch_sampler
        if refused:
            with pytest.raises(UserError, match="other items per epoch"):
                next(iter(sampler))
        else:
            assert len(list(sampler)) == len(sampler.batches()) - 2  # resumes, skipping the 2 done


@pytest.mark.parametrize("repeat", ["0", "2.5", "true"])
def test_a_repeat_that_is_not_a_whole_number_of_at_least_one_is_refused(tmp_path, repeat):
    de, en = write_extra(tmp_path)
    with pytest.raises(Exception) as e:
        datamodule(tmp_path, f"data.extra_train=[{{src:{de},tgt:{en},repeat:{repeat}}}]")
    cause = e.value
    while not isinstance(cause, UserError):
        cause = cause.__cause__
    assert f"data.extra_train[0].repeat={repeat}: give a whole number of at least 1" in str(cause)  # as typed


def epoch_batches(tmp_path, multiple: int) -> list[dict]:
    dm = datamodule(tmp_path, f"data.length_multiple={multiple}", "data.max_tokens=64", "data.eval_max_tokens=64")
    dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    return list(dm.train_dataloader()) + list(dm.val_dataloader())


def test_length_multiple_gives_an_epoch_few_batch_lengths_within_the_budget_and_the_same_tokens(tmp_path):
    """A compiled step specializes on each length's divisibility: padded to a multiple of 4, an
    epoch's batches take a few lengths, and the token budget counts the padding."""
    plain, padded = epoch_batches(tmp_path / "a", 1), epoch_batches(tmp_path / "b", 4)
    for batch in padded:
        s, t = batch["src"].size(1), batch["tgt_in"].size(1)
        assert s % 4 == 0 and t % 4 == 0 and batch["tgt_out"].size(1) == t
        assert batch["src"].size(0) * max(s, t) <= 64
    lengths = {
        m: {b[k].size(1) for b in batches for k in ("src", "tgt_in")} for m, batches in ((1, plain), (4, padded))
    }
    assert len(lengths[4]) * 2 <= len(lengths[1]), lengths
    shapes = {m: {(b["src"].size(1), b["tgt_in"].size(1)) for b in batches} for m, batches in ((1, plain), (4, padded))}
    assert len(shapes[4]) * 2 <= len(shapes[1]), shapes

    def real(batches):  # every pair once, each with the same tokens: padding adds pads only
        return sorted(
            (int(i), tuple(s[s != 0].tolist()), tuple(t[t != 0].tolist()))
            for b in batches
            for i, s, t in zip(b["index"], b["src"], b["tgt_out"])
        )

    assert real(padded) == real(plain)


@pytest.mark.parametrize("device, pinned", [("cuda", True), ("cpu", False)])
def test_batches_are_page_locked_for_a_gpu_and_only_there(tmp_path, monkeypatch, device, pinned):
    asked = []  # a CPU-only torch turns pin_memory off itself: record what the loader is asked for
    monkeypatch.setattr(qkvmt.data.datamodule, "DataLoader", lambda *args, **kwargs: asked.append(kwargs["pin_memory"]))
    dm = datamodule(tmp_path)
    dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    dm.trainer = SimpleNamespace(
        strategy=SimpleNamespace(root_device=torch.device(device)), global_rank=0, world_size=1
    )
    dm.train_dataloader(), dm.val_dataloader()
    assert asked == [pinned, pinned]
