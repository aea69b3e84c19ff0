"""A Hugging Face folder is checked as a whole before any model is built: each malformed file (config.json,
generation_config.json, the SentencePiece models, vocab.json, tokenizer.json, a pickled pytorch_model.bin)
is one line naming the file and the key, from qkvmt.load and from the commands as a user types them, which
leave nothing behind."""

import json
import pickle
import random
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import qkvmt
from qkvmt.errors import UserError
from tests.commandline import run_script, user_error
from tests.conftest import write_corpus
from tests.test_bad_input import train_args

pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

from tests.hf.test_tokenizers import whole_marian_folder  # noqa: E402  (needs transformers)


class Code:
    """A pickled call (here a harmless one): what a hostile pytorch_model.bin holds."""

    def __reduce__(self):
        return (print, ("the payload ran",))


def noise(n: int = 512) -> bytes:
    return random.Random(0).randbytes(n)


def write(name: str, data):
    """An edit that writes `data` (bytes, or a value as JSON) into the folder's file `name`."""
    return lambda folder: (folder / name).write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())


def setting(name: str, **changes):
    """An edit of the JSON file `name`: `changes` set in it."""
    return lambda folder: write(name, json.loads((folder / name).read_text()) | changes)(folder)


def symlink_loop(folder):
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(folder / "config.json")


def short_vocabulary(folder):  # the model keeps its rows: the file names fewer ids
    vocab = json.loads((folder / "vocab.json").read_text())
    write("vocab.json", dict(list(vocab.items())[:10]))(folder)


def without(name: str, key: str):
    """An edit of the JSON file `name`: `key` taken out of it."""
    return lambda folder: write(name, {k: v for k, v in json.loads((folder / name).read_text()).items() if k != key})(
        folder
    )


def int64_weights(folder):  # whole numbers, which would load rounded into the float weights
    weights = load_file(folder / "model.safetensors")
    save_file({k: v.long() for k, v in weights.items()}, folder / "model.safetensors")


def sharded(shard: str):
    """The weights as one shard, model-00001-of-00001.safetensors, under an index that names `shard` for them."""

    def edit(folder):
        weights = load_file(folder / "model.safetensors")
        (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
        write("model.safetensors.index.json", {"metadata": {}, "weight_map": dict.fromkeys(weights, shard)})(folder)

    return edit


def tokenizer_json(data: bytes):
    """A folder whose tokenizer is tokenizer.json (its SentencePiece pair gone), holding `data`."""

    def edit(folder):
        (folder / "source.spm").unlink()
        (folder / "tokenizer.json").write_bytes(data)

    return edit


def pickled_weights(how: str):
    """pytorch_model.bin in place of model.safetensors: the weights and a pickled call, saved by torch.save
    (zip), by its legacy format, or by pickle itself."""

    def edit(folder):
        weights = load_file(folder / "model.safetensors") | {"x": Code()}
        (folder / "model.safetensors").unlink()
        path = folder / "pytorch_model.bin"
        if how == "raw":
            path.write_bytes(pickle.dumps(weights))
        else:
            torch.save(weights, path, _use_new_zipfile_serialization=how == "zip")

    return edit


CODE = r"pytorch_model.bin holds code or objects that are not plain data; refusing to load it \(UnpicklingError: "
MALFORMED = {
    "config.json 5": (write("config.json", 5), r"config.json is not a JSON object \(it holds 5\)"),
    "config.json model_type list": (
        setting("config.json", model_type=["marian"]),
        r'config.json: model_type=\["marian"\] cannot be imported',
    ),
    "config.json dropout abc": (setting("config.json", dropout="abc"), r'config.json: dropout="abc" is not a number'),
    "config.json nested": (write("config.json", b"[" * 100_000), "config.json is not readable JSON: it nests deeper"),
    "config.json invalid": (write("config.json", b'{"model_type": "mar'), r"config.json is not readable JSON \(JSONDe"),
    "config.json empty": (write("config.json", b""), r"config.json is not readable JSON \(JSONDecodeError"),
    "config.json not UTF-8": (
        write("config.json", b'{"model_type": "\xff"}'),
        r"config.json is not readable JSON \(Un",
    ),
    "config.json symlink loop": (symlink_loop, r"config.json is not readable JSON \(OSError: .*Too many levels"),
    "config.json encoder_layers": (
        setting("config.json", encoder_layers=1_000_000),
        r"config.json: encoder_layers=1000000, but .*model.safetensors holds 2 encoder layers",
    ),
    "config.json max_position_embeddings": (
        setting("config.json", max_position_embeddings=10**9),
        r"config.json: max_position_embeddings=1000000000: give a whole number from 2 to 65536",
    ),
    "config.json encoder_layers 2.0": (
        setting("config.json", encoder_layers=2.0),
        r"config.json: encoder_layers=2.0 is not a whole number; give a positive whole number",
    ),
    "config.json without model_type": (
        without("config.json", "model_type"),
        r"config.json: model_type=null cannot be imported; qkvmt opens marian, m2m_100",
    ),
    "generation length_penalty NaN": (
        lambda folder: (folder / "generation_config.json").write_text('{"length_penalty": NaN}'),
        r"generation_config.json: length_penalty=NaN: give a finite number",
    ),
    "tokenizer_config.json eos_token list": (
        setting("tokenizer_config.json", eos_token=["</s>"]),
        r'tokenizer_config.json: eos_token=\["</s>"\] is not a token',
    ),
    "model.safetensors int64": (int64_weights, r"model.safetensors: \S+ holds torch.int64 values"),
    "index out of the folder": (
        sharded("../model-00001-of-00001.safetensors"),
        r'index.json: \S+ is in "../model-00001-of-00001.safetensors", which is not a file name in',
    ),
    "index missing shard": (
        sharded("model-00002-of-00002.safetensors"),
        r"index.json: \S+ is in model-00002-of-00002.safetensors, which is not in the folder",
    ),
    "index weight_map list": (
        lambda folder: sharded("")(folder) or write("model.safetensors.index.json", {"weight_map": [1]})(folder),
        r"index.json: weight_map=\[1\] is not an object",
    ),
    "generation max_length": (
        setting("generation_config.json", max_length="abc"),
        r'generation_config.json: max_length="abc" is not a whole number',
    ),
    "generation length_penalty": (
        setting("generation_config.json", length_penalty="x"),
        r'generation_config.json: length_penalty="x" is not a number',
    ),
    "generation bad_words_ids": (
        setting("generation_config.json", bad_words_ids=[5]),
        r"generation_config.json: bad_words_ids=\[5\] is not a list of lists of ids",
    ),
    "generation bad_words_ids of a word": (
        setting("generation_config.json", bad_words_ids=[[5, 6]]),
        r"generation_config.json: bad_words_ids holds \[5, 6\]; qkvmt's search bans only \[\d+\]: give "
        r"bad_words_ids=\[\[\d+\]\] to decode without that ban, or translate with transformers",
    ),
    "generation forced_eos_token_id": (
        setting("generation_config.json", forced_eos_token_id=5),
        r"generation_config.json: forced_eos_token_id=5 is not eos_token_id=0; qkvmt's search ends an output with "
        r"</s>: give 0 or null",
    ),
    "generation renormalize_logits": (
        setting("generation_config.json", renormalize_logits="yes"),
        r'generation_config.json: renormalize_logits="yes" is not true or false',
    ),
    "source.spm noise": (write("source.spm", noise()), "source.spm is not a SentencePiece model"),
    "target.spm noise": (write("target.spm", noise()), "target.spm is not a SentencePiece model"),
    "vocab.json invalid": (write("vocab.json", b'{"</s>": 0,'), r"vocab.json is not readable JSON \(JSONDecodeError"),
    "vocab.json list": (write("vocab.json", ["</s>", "<unk>"]), r"vocab.json is not a JSON object"),
    "vocab.json short": (short_vocabulary, r"vocab.json has no token for \d+ of the model's \d+ output ids"),
    "vocab.json id 5000": (
        setting("vocab.json", **{"▁": 5000}),
        r"vocab.json gives '▁' the id 5000, but the embedding it goes into has \d+ rows",
    ),
    "tokenizer.json noise": (tokenizer_json(noise()), r"tokenizer.json is not a tokenizer \(Exception: "),
    "tokenizer.json {}": (tokenizer_json(b"{}"), r"tokenizer.json is not a tokenizer \(Exception: "),
    "pytorch_model.bin zip": (pickled_weights("zip"), CODE),
    "pytorch_model.bin legacy": (pickled_weights("legacy"), CODE),
    "pytorch_model.bin raw": (pickled_weights("raw"), r"pytorch_model.bin is not a readable weights file"),
}
# What the commands are run on: one fault of each file.
COMMANDS = [
    "config.json dropout abc",
    "config.json symlink loop",
    "generation bad_words_ids",
    "source.spm noise",
    "vocab.json short",
    "tokenizer.json {}",
    "pytorch_model.bin legacy",
    "pytorch_model.bin raw",
    "index out of the folder",
]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return whole_marian_folder(tmp_path_factory.mktemp("whole") / "opus-mt-de-en")[0]


@pytest.fixture
def malformed(whole, tmp_path, request):
    """A copy of the whole folder with one fault (the test's `case`), and the message that names it."""
    edit, match = MALFORMED[request.node.callspec.params["case"]]
    folder = shutil.copytree(whole, tmp_path / "opus-mt-de-en")
    edit(folder)
    return folder, match


@pytest.mark.parametrize("case", MALFORMED)
def test_qkvmt_load_names_the_file_and_the_key(malformed, case, capsys, recwarn):
    folder, match = malformed
    with pytest.raises(UserError, match=match) as e:
        qkvmt.load(folder, device="cpu")
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)
    assert str(folder) in str(e.value) and f": {folder}" not in str(e.value)  # named once, not file by file
    assert "the payload ran" not in capsys.readouterr().out
    assert not [w.message for w in recwarn]  # torch's own, beside the line


@pytest.mark.parametrize("case", COMMANDS)
def test_translate_is_one_line(malformed, case):
    folder, match = malformed
    r = run_script("translate", f"ckpt_path={folder}", stdin=b"ein Mann\n")
    assert r.stdout == ""
    line = user_error(r)
    assert re.search(match, line), line
    assert [x for x in r.stderr.splitlines() if x.strip()] == [line]  # no torch warning, no escape before it


@pytest.mark.parametrize("case", COMMANDS)
def test_init_from_is_one_line_and_leaves_no_run_folder(malformed, case, tmp_path):
    folder, match = malformed
    corpus, out = write_corpus(tmp_path / "corpus"), tmp_path / "run"
    r = run_script("train", *train_args(corpus, out, f"init_from={folder}", "model=init_from"))
    assert re.search(match, user_error(r))
    assert not out.exists()


@pytest.mark.parametrize("case", ["vocab.json short", "pytorch_model.bin zip"])
def test_export_is_one_line_and_writes_nothing(malformed, case, tmp_path):
    folder, match = malformed
    out = tmp_path / "exported"
    r = run_script("export", f"ckpt_path={folder}", "format=huggingface", f"output_dir={out}")
    assert re.search(match, user_error(r))
    assert not out.exists()


def test_special_tokens_written_as_objects_open(whole, tmp_path):
    """Older tokenizer_config.json files write each special token as an AddedToken's fields."""
    folder = shutil.copytree(whole, tmp_path / "opus-mt-de-en")
    tokens = {k: {"__type": "AddedToken", "content": v} for k, v in (("eos_token", "</s>"), ("unk_token", "<unk>"))}
    setting("tokenizer_config.json", **tokens)(folder)
    sentences = ["ein Mann fährt Rad .", "zwei Hunde"]
    theirs = qkvmt.load(whole, device="cpu").translate(sentences)
    assert list(qkvmt.load(folder, device="cpu").translate(sentences)) == list(theirs)


def test_a_real_m2m100_layout_with_made_up_words_opens(tmp_path):
    """m2m100_418M's 128112 rows: vocab.json, the languages, then fairseq's eight made-up words, which the
    model may output: a translation leaves them out, as padding (transformers writes each as "<unk>")."""
    from tests.hf.test_languages import m2m100_folder

    theirs, _ = m2m100_folder(tmp_path / "m2m100")
    model = qkvmt.load(tmp_path / "m2m100", device="cpu", src_lang="de", tgt_lang="en")
    rows = model.transformer.cfg.target_vocab_size
    assert model.tokenizer.decode([5, 6, *range(rows - 8, rows), 7]) == theirs.decode(
        [5, 6, 7], skip_special_tokens=True
    )
