"""data.tokenizer: each vocabulary a run can make, its ids against the library that makes it, its refusals, and a
tiny model trained with each, reloaded from its checkpoint alone."""

import io
import shutil
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from tokenizers import Tokenizer, models, trainers

import qkvmt
from qkvmt.data.vocabularies import MIN_FREQUENCY, model_sizes
from qkvmt.errors import UserError
from qkvmt.text.tokenizer import SPECIALS, decode, encode, encode_target, target_side, train_bpe
from tests.commandline import run_python
from tests.conftest import compose_train, tiny_overrides, write_corpus

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

SENTENCES = ["w1 w12 w3", "w30 w7  w25 w2", "w9"]
TARGETS = ["t3 t12 t1", "t2 t25 t7 t30"]


def datamodule(tmp_path, *overrides):
    corpus = write_corpus(tmp_path / "corpus", sizes={"train": 300, "val": 4, "test_2016_flickr": 4})
    return instantiate(compose_train(*tiny_overrides(corpus, tmp_path / "run"), *overrides).data)


def processor(data: bytes):
    proc = spm.SentencePieceProcessor()
    proc.LoadFromSerializedProto(data)
    return proc


def piece_model(tmp_path, **control) -> bytes:
    """A unigram model of the toy corpus's source side, with these control ids (sentencepiece's arguments)."""
    model = io.BytesIO()
    texts = [f"w{i} w{i + 1} w{i + 2}" for i in range(40)] * 5
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=60, hard_vocab_limit=False, **control
    )
    return model.getvalue()


@pytest.mark.parametrize("choice", ["sentencepiece", "separate_bpe"])
def test_sentencepiece_ids_are_the_models_own_and_each_side_has_its_model(tmp_path, choice):
    dm = datamodule(tmp_path, f"data/tokenizer={choice}")
    tok = dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    files = dm.tokenizer_files
    source, target = processor(files["source.spm"]), processor(files["target.spm"])
    assert encode(tok, SENTENCES) == [source.encode(" ".join(s.split())) for s in SENTENCES]
    assert encode_target(tok, TARGETS) == [target.encode(t) for t in TARGETS]
    assert [source.IdToPiece(i) for i in range(len(SPECIALS))] == SPECIALS  # the ids ModelConfig takes
    assert (
        ("target_vocab.json" in files)
        == (choice == "separate_bpe")
        == (source.serialized_model_proto() != target.serialized_model_proto())
    )
    assert decode(target_side(tok), encode_target(tok, TARGETS)) == TARGETS
    sizes = model_sizes(tok, dm.vocabulary)  # what a run's (and the benchmark's) model is built with
    assert sizes["vocab_size"] == source.GetPieceSize() and sizes["pad_id"] == source.PieceToId("<pad>")
    assert sizes.get("tgt_vocab_size", sizes["vocab_size"]) == target.GetPieceSize()
    assert sizes.get("tie_embeddings", True) == (choice != "separate_bpe")
    assert sorted(p.name for p in (tmp_path / "run" / "tokenizer").iterdir()) == sorted(files)
    again = datamodule(tmp_path / "again", f"data/tokenizer={choice}")  # a rerun reopens what the folder keeps
    again.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert again.tokenizer_files == files


def test_a_sentencepiece_file_keeps_its_ids_and_gets_pad_after_them(tmp_path, caplog):
    model = piece_model(tmp_path, pad_id=-1)  # sentencepiece's own default: unk 0, <s> 1, </s> 2, no <pad>
    (tmp_path / "own.model").write_bytes(model)
    dm = datamodule(tmp_path, "data/tokenizer=file", f"data.tokenizer.path={tmp_path / 'own.model'}")
    with caplog.at_level("INFO"):
        tok = dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    proc = processor(model)
    assert encode(tok, SENTENCES) == [proc.encode(" ".join(s.split())) for s in SENTENCES]
    assert tok.token_to_id("<pad>") == proc.GetPieceSize() == tok.get_vocab_size() - 1
    assert [r.message for r in caplog.records if "<pad>" in r.message] == [
        f"data.tokenizer.path={tmp_path / 'own.model'} has no <pad>: it is added after its {proc.GetPieceSize()} "
        "pieces, as Marian and fairseq add it"
    ]
    (tmp_path / "own.model").write_bytes(piece_model(tmp_path, pad_id=-1, model_type="bpe"))
    with pytest.raises(UserError, match="the contents of data.tokenizer.path changed"):
        datamodule(tmp_path, "data/tokenizer=file", f"data.tokenizer.path={tmp_path / 'own.model'}").load_tokenizer(
            tmp_path / "run" / "tokenizer.json"
        )


def test_a_tokenizers_json_file_is_the_runs_tokenizer(tmp_path):
    given = train_bpe(SENTENCES * 20, vocab_size=40, min_frequency=1)
    given.save(str(tmp_path / "given.json"))
    dm = datamodule(tmp_path, "data/tokenizer=file", f"data.tokenizer.path={tmp_path / 'given.json'}")
    tok = dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert tok.to_str() == given.to_str() and dm.tokenizer_files is None
    assert (tmp_path / "run" / "tokenizer.json").read_text() == (tmp_path / "given.json").read_text()


def json_without(tmp_path, missing: str):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    specials = [t for t in SPECIALS if t != missing]
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=30, special_tokens=specials, show_progress=False))
    tok.save(str(tmp_path / "no.json"))
    return tmp_path / "no.json"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: json_without(p, "</s>"), "data.tokenizer.path={} has no </s>: qkvmt needs <pad>, <s>, </s>, <unk>"),
        (
            lambda p: p.joinpath("no_eos.model").write_bytes(piece_model(p, eos_id=-1)) and p / "no_eos.model",
            "data.tokenizer.path={} has no </s> (the model disables it)",
        ),
        (
            lambda p: p.joinpath("other.model").write_bytes(piece_model(p, bos_piece="<bos>")) and p / "other.model",
            "data.tokenizer.path={} has no <s> (the model calls it '<bos>')",
        ),
        (lambda p: p / "absent.model", "data.tokenizer.path={} cannot be read (No such file or directory)"),
        (lambda p: p.joinpath("dir.model").mkdir() or p / "dir.model", "data.tokenizer.path={} is a folder: give"),
        (lambda p: p.joinpath("bad.model").write_bytes(b"not a model") and p / "bad.model", "is not a SentencePiece"),
    ],
    ids=["json-without-eos", "model-eos-disabled", "model-other-bos", "missing", "a-folder", "not-a-model"],
)
def test_a_file_the_model_cannot_use_is_one_line_naming_it_and_nothing_is_written(tmp_path, make, message):
    path = make(tmp_path)
    dm = datamodule(tmp_path, "data/tokenizer=file", f"data.tokenizer.path={path}")
    with pytest.raises(UserError) as e:
        dm.load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert message.format(path) in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("first, then", [("sentencepiece", "joint_bpe"), ("joint_bpe", "separate_bpe")])
def test_a_rerun_with_another_vocabulary_is_refused_before_it_writes(tmp_path, first, then):
    datamodule(tmp_path, f"data/tokenizer={first}").load_tokenizer(tmp_path / "run" / "tokenizer.json")
    before = sorted((tmp_path / "run").rglob("*"))
    with pytest.raises(UserError, match=f"data.tokenizer={first} there, {then} asked") as e:
        datamodule(tmp_path, f"data/tokenizer={then}").load_tokenizer(tmp_path / "run" / "tokenizer.json")
    assert "\n" not in str(e.value) and sorted((tmp_path / "run").rglob("*")) == before


@pytest.mark.parametrize(
    "given, error",
    [
        (
            ["data.tokenizer=file", "data.tokenizer.path={tmp}/x.model"],
            "data.tokenizer.path={tmp}/x.model cannot be read (No such file or directory): give a readable file",
        ),
        (["data.tokenizer=file"], "data.tokenizer.path has no value: give data.tokenizer.path=... on the command line"),
        (
            ["data.tokenizer=wordpiece"],
            "data.tokenizer=wordpiece: no such data.tokenizer; use one of file, joint_bpe, sentencepiece, separate_bpe",
        ),
        (
            ["data.tokenizer=separate_bpe", "data.min_frequency=50"],  # SentencePiece keeps no minimum count
            "data.min_frequency=50 applies to data.tokenizer=joint_bpe only, not separate_bpe: "
            "leave data.min_frequency out",
        ),
        (
            ["+data.tokenizer.path={tmp}/given.json"],  # the default joint_bpe reads no file
            "data.tokenizer.path is no setting of data.tokenizer=joint_bpe (its settings: none); "
            "choose with data.tokenizer=joint_bpe, sentencepiece, separate_bpe or file",
        ),
    ],
    ids=["missing-file", "no-path", "no-such-choice", "min-frequency-unread", "path-without-file"],
)
def test_the_command_line_chooses_with_dots_and_a_mistake_leaves_no_run_folder(tmp_path, given, error):
    corpus = write_corpus(tmp_path / "corpus", sizes={"train": 30, "val": 4, "test_2016_flickr": 4})
    out = tmp_path / "run"
    args = [a for a in tiny_overrides(corpus, out) if not a.startswith("paths.output_dir")]
    given = [g.format(tmp=tmp_path) for g in given]
    result = run_python("-m", "qkvmt", "train", *args, f"hydra.run.dir={out}", *given)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if not line.startswith("INFO")]
    assert lines == [f"error: {error.format(tmp=tmp_path)}"]
    assert not out.exists()


def test_each_vocabulary_trains_and_reloads_from_its_checkpoint_alone(vocabulary_run, tmp_path):
    run, separate = vocabulary_run["run"], vocabulary_run["tokenizer"] == "separate_bpe"
    shutil.copy(run / "checkpoints" / "last.ckpt", tmp_path / "alone.ckpt")  # no run folder beside it
    model = qkvmt.load(str(tmp_path / "alone.ckpt"))
    tok = model.tokenizer
    kept = {p.name: p.read_bytes() for p in (run / "tokenizer").iterdir()}
    assert encode(tok, SENTENCES) == [processor(kept["source.spm"]).encode(" ".join(s.split())) for s in SENTENCES]
    assert decode(target_side(tok), encode_target(tok, TARGETS)) == TARGETS
    cfg = model.transformer.cfg
    assert (cfg.target_vocab_size, cfg.tie_embeddings) == (target_side(tok).get_vocab_size(), not separate)
    assert model.translate(SENTENCES).ids == qkvmt.load(str(run / "checkpoints" / "last.ckpt")).translate(SENTENCES).ids
    # the view's words are the sentence's whitespace words, whatever pieces cut them: here a bare word start
    # "▁" before a piece of an unseen letter
    source = "w30 xw7 w25 w2"
    alignment = model.align(source, TARGETS[1])
    assert "▁" in alignment.src_tokens
    assert [w.replace("<unk>", "x") for w in alignment.src_words] == source.split()
    assert alignment.tgt_words == TARGETS[1].split()


def test_a_run_from_a_trained_model_refuses_a_vocabulary_of_its_own(trained_run, tmp_path):
    from qkvmt.pipeline.train import train

    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    overrides = tiny_overrides(trained_run["corpus"], tmp_path / "run")
    with pytest.raises(UserError, match=f"init_from={ckpt} brings its own tokenizer, so data.tokenizer cannot") as e:
        train(compose_train(*overrides, f"init_from={ckpt}", "data/tokenizer=sentencepiece"))
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()
    with pytest.raises(UserError, match=f"init_from={ckpt} brings its own tokenizer, so data.min_frequency=5 cannot"):
        train(compose_train(*overrides, f"init_from={ckpt}", "data.min_frequency=5"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("data", ["multi30k", "hf"])
def test_each_data_configs_min_frequency_is_the_default_the_refusals_take_as_unset(data):
    conf = OmegaConf.load(Path(qkvmt.__file__).parent / "conf" / "data" / f"{data}.yaml")
    assert conf.min_frequency == MIN_FREQUENCY  # else every SentencePiece run would be refused
