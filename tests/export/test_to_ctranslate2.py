"""The CTranslate2 export against our own model: same log-probabilities, same translations."""

import gzip
import io
from types import SimpleNamespace

import pytest
import torch

from qkvmt.decoding.lines import translate_ids
from qkvmt.decoding.search import DecodeConfig
from qkvmt.decoding.stepper import max_lengths
from qkvmt.errors import UserError
from qkvmt.loading import load_model
from qkvmt.model.config import ModelConfig
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.pipeline.export import export
from qkvmt.pipeline.train import train
from qkvmt.pipeline.translate import translate
from qkvmt.text.tokenizer import encode, encode_target, train_bpe
from tests.conftest import compose_inference, compose_train, tiny_overrides, training_fixture

ctranslate2 = pytest.importorskip("ctranslate2", reason="the [deploy] extra (ctranslate2) is not installed")

from qkvmt.export.ctranslate2_engine import load_ctranslate2, translate_lines_ctranslate2  # noqa: E402
from qkvmt.export.to_ctranslate2 import CTranslate2Format, export_ctranslate2  # noqa: E402
from qkvmt.model.checkpoint import CheckpointMeta  # noqa: E402
from tests.model.test_ablations import SINGLE_ABLATIONS  # noqa: E402

META = CheckpointMeta(model_config={}, tokenizer="", src_lang="de", tgt_lang="en")


def toy_test_sources(corpus_root) -> list[str]:
    return gzip.decompress((corpus_root / "test_2016_flickr.de.gz").read_bytes()).decode().splitlines()


def export_run(run, tmp_path_factory):
    """The run's last checkpoint exported by scripts/export.py: our model, tokenizer, and CTranslate2's."""
    ckpt = run / "checkpoints" / "last.ckpt"
    out = tmp_path_factory.mktemp("ct2") / "model"
    result = export(compose_inference("export", f"ckpt_path={ckpt}", f"output_dir={out}"))
    assert result["output_dir"] == str(out)
    model, tok, _ = load_model(ckpt)
    return model, tok, load_ctranslate2(out)


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    return export_run(trained_run["run"], tmp_path_factory)


@pytest.fixture(scope="module")
def exported_vocabulary(vocabulary_run, tmp_path_factory):
    """A model of each other vocabulary (data.tokenizer: SentencePiece, one per language), exported."""
    return export_run(vocabulary_run["run"], tmp_path_factory)


@training_fixture(scope="module")
def exported_rotary(trained_run, tmp_path_factory):
    """trained_run's recipe with model.positions=rotary, exported."""
    run = tmp_path_factory.mktemp("rotary") / "run"
    overrides = tiny_overrides(trained_run["corpus"], run, steps=40, val_every=20)
    train(compose_train(*overrides, "model.positions=rotary", "module.optimizer.lr=3e-3", "module.warmup_steps=10"))
    model, tok, engine = export_run(run, tmp_path_factory)
    assert model.cfg.positions == "rotary"
    return model, tok, engine


def teacher_forced(model, tok, sources, targets):
    """Our log-probability of each target token and of </s>, sentence by sentence."""
    inp = build_inputs(encode(tok, sources), encode(tok, targets), model.cfg.specials)
    with torch.no_grad():
        logp = model(inp.src, inp.tgt_in)[0].log_softmax(-1).gather(-1, inp.tgt_out[..., None])[..., 0]
    return [row[: (out != 0).sum()].tolist() for row, out in zip(logp, inp.tgt_out)]


def ct2_scores(translator, tok, sources, targets):
    def tokens(lines):
        return [[tok.id_to_token(i) for i in ids] for ids in encode(tok, lines)]

    return [r.log_probs for r in translator.score_batch(tokens(sources), tokens(targets))]


@pytest.mark.parametrize(
    "norm_first, tied, positions",
    [
        (False, True, "sinusoidal"),
        (True, True, "sinusoidal"),
        (True, False, "sinusoidal"),
        (False, True, "rotary"),
        (True, False, "rotary"),
    ],
)
def test_every_layout_scores_like_ours(tmp_path, norm_first, tied, positions):
    # Post- and pre-LN, tied and separate embeddings, sinusoidal and rotary positions: the spec
    # must reproduce the whole network, which teacher-forced log-probabilities of random weights
    # test more strictly than outputs.
    torch.manual_seed(0)
    sources = ["a b c d", "b a", "c c d a b a"]
    targets = ["d c b a", "a b", "a b a d c c"]
    tok = train_bpe(sources + targets, vocab_size=20, min_frequency=1)
    cfg = ModelConfig(
        vocab_size=tok.get_vocab_size(),
        d_model=16,
        n_heads=2,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=24,
        norm_first=norm_first,
        tie_embeddings=tied,
        max_positions=32,
        positions=positions,
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a misplaced one shows
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.3)
    export_ctranslate2(model, tok, META, tmp_path)
    translator = load_ctranslate2(tmp_path).translator
    for ours, theirs in zip(
        teacher_forced(model, tok, sources, targets), ct2_scores(translator, tok, sources, targets)
    ):
        assert theirs == pytest.approx(ours, abs=1e-4)


@pytest.mark.parametrize("beam_size", [1, 5])
@pytest.mark.parametrize("which", ["exported", "exported_rotary"], ids=["sinusoidal", "rotary"])
def test_trained_model_translates_token_for_token_like_ours(which, request, trained_run, beam_size):
    translates_like_ours(*request.getfixturevalue(which), toy_test_sources(trained_run["corpus"]), beam_size)


@pytest.mark.parametrize("beam_size", [1, 5])
def test_each_vocabulary_translates_token_for_token_like_ours(exported_vocabulary, vocabulary_run, beam_size):
    translates_like_ours(*exported_vocabulary, toy_test_sources(vocabulary_run["corpus"]), beam_size)


def translates_like_ours(model, tok, engine, lines, beam_size):
    cfg = DecodeConfig(beam_size=beam_size)
    ours = translate_ids(model, tok, lines, cfg)
    theirs = encode_target(tok, translate_lines_ctranslate2(engine, lines, cfg))
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert len(differ) <= len(lines) // 100
    # The one known difference: at the length limit we force </s> and count its probability.
    limits = max_lengths(torch.tensor([len(x) + 1 for x in encode(tok, lines)]), cfg, model.cfg.max_positions)
    assert all(len(ours[i]) + 1 >= limits[i] or len(theirs[i]) + 1 >= limits[i] for i in differ)


def test_trained_model_scores_its_translations_like_ours(exported, trained_run):
    model, tok, engine = exported
    lines = toy_test_sources(trained_run["corpus"])[:8]
    hyps = translate_lines_ctranslate2(engine, lines, DecodeConfig(beam_size=5))
    for ours, theirs in zip(teacher_forced(model, tok, lines, hyps), ct2_scores(engine.translator, tok, lines, hyps)):
        assert theirs == pytest.approx(ours, abs=1e-4)


def test_translate_script_engine_ctranslate2_reads_stdin_like_ours(exported, trained_run, tmp_path):
    lines = ["w1 w2 w3", "", "w7 w8 w9"]
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    folder = tmp_path / "m"
    export(compose_inference("export", f"ckpt_path={ckpt}", f"output_dir={folder}"))
    outs = []
    for engine in (["engine=ctranslate2", f"model_dir={folder}"], [f"ckpt_path={ckpt}"]):
        out = io.StringIO()
        translate(
            compose_inference("translate", *engine), stdin=io.BytesIO(("\n".join(lines) + "\n").encode()), stdout=out
        )
        outs.append(out.getvalue())
    assert outs[0] == outs[1] and outs[0].split("\n")[1] == ""


@pytest.mark.parametrize("ablation", SINGLE_ABLATIONS)
def test_attention_ablations_are_refused_naming_the_setting(ablation, tmp_path):
    """As `qkvmt export` checks the model, and when export_ctranslate2 is called directly."""
    model = Transformer(ModelConfig(vocab_size=10, d_model=8, n_heads=2, **ablation))
    setting, value = next(iter(ablation.items()))
    fmt = CTranslate2Format(SimpleNamespace(quantization="float32"))
    for attempt in (fmt.check, lambda m: export_ctranslate2(m, None, META, tmp_path)):
        with pytest.raises(UserError, match="format=ctranslate2: its attention has W_Q, W_K, W_V and W_O") as e:
            attempt(model)
        assert f"model.{setting}={str(value).lower()}" in str(e.value) and "\n" not in str(e.value)
    assert not any(tmp_path.iterdir())
