"""qkvmt evaluate refuses what cannot work in one line naming the setting or file, before the model
loads wherever it can: outputs that cannot be written, zero sentence pairs, significance settings
that are wrong or cannot take effect, a baseline that is missing or a folder."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from qkvmt.errors import UserError
from qkvmt.pipeline.evaluate import evaluate
from qkvmt.text.significance import DEFAULTS, MOST
from tests.conftest import compose_inference, write_corpus

UNWRITABLE = "/proc/qkvmt_out"  # the kernel's own folder: no one, root included, makes folders in it


def refused_before_loading(monkeypatch, *overrides: str) -> str:
    """evaluate's one-line refusal of `overrides` on the bundled model, which must not load."""
    monkeypatch.setattr("qkvmt.pipeline.evaluate.load_for_inference", lambda cfg: pytest.fail("the model loaded"))
    with pytest.raises(UserError) as refusal:
        evaluate(compose_inference("evaluate", "ckpt_path=multi30k-de-en", *overrides))
    assert "\n" not in str(refusal.value)
    return str(refusal.value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["baseline.ckpt_path=multi30k-de-en", "baseline.hyps_file=h.txt"], "not both"),
        (["baseline.hyps_file=/nonexistent/h.txt"], "baseline.hyps_file=/nonexistent/h.txt: no such file"),
        (["baseline.hyps_file={tmp}"], "baseline.hyps_file={tmp} is a folder"),
        (["baseline.ckpt_path=/nonexistent/base.ckpt"], "baseline.ckpt_path=/nonexistent/base.ckpt: no such file"),
        (["metrics.bleu_tokenize=moses"], "metrics.bleu_tokenize='moses'"),
        (["significance.tests=[bs,t]"], "significance.tests"),
        (["significance.samples.ar=0"], "significance.samples.ar=0"),
        (  # sacreBLEU would hold every trial at once: terabytes
            ["baseline.hyps_file={hyps}", "significance.samples.ar=1000000000"],
            f"significance.samples.ar=1000000000: give a whole number from 1 to {MOST['ar']:,}",
        ),
        (["baseline.hyps_file={hyps}", "+significance.samples.xx=5"], "significance.samples.xx: no such test"),
        (["baseline.hyps_file={hyps}", "significance.tests=[bs]", "significance.samples.ar=abc"], "samples.ar='abc'"),
        (
            ["significance.seed=abc"],
            "significance.seed='abc': give a whole number",
        ),  # no baseline: checked all the same
        (["significance.seed=7"], "significance.seed=7 takes effect only in a comparison: give baseline.ckpt_path="),
        (["significance.tests=[bs]"], "significance.tests=[bs] takes effect only in a comparison"),
        # paths Hydra reads as numbers are paths all the same
        (["baseline.ckpt_path=5"], "baseline.ckpt_path=5: no such file or folder"),
        (["baseline.hyps_file=5"], "baseline.hyps_file=5: no such file"),
        (["src_file=5", "ref_file=6"], "file not found: 5"),
        (["ref_tok_file=5"], "file not found: 5"),  # read before the model loads, as every file evaluate reads
    ],
)
def test_a_comparison_that_cannot_run_is_refused_before_the_model_loads(monkeypatch, tmp_path, overrides, message):
    hyps = tmp_path / "hyps.en"
    hyps.write_text("A man .\n")
    given = [o.format(tmp=tmp_path, hyps=hyps) for o in overrides]
    assert message.format(tmp=tmp_path) in refused_before_loading(monkeypatch, f"output_dir={tmp_path}/out", *given)


def test_the_significance_defaults_are_the_ones_the_checks_take_as_unchanged():
    """Else every evaluation without a baseline would be refused for settings it never gave."""
    assert OmegaConf.to_container(compose_inference("evaluate").significance) == DEFAULTS


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["output_dir=''"], "output_dir is empty: give a folder for the outputs, or leave output_dir out"),
        ([f"output_dir={UNWRITABLE}"], f"output_dir={UNWRITABLE}: cannot make a folder in /proc"),
        (  # the default folder, beside a bundled model's name under paths.log_dir
            [f"paths.log_dir={UNWRITABLE}"],
            f"the default output folder {UNWRITABLE}/pretrained/multi30k-de-en/evaluations: cannot make a folder",
        ),
    ],
)
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_model_loads(monkeypatch, overrides, message):
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc")
    assert refused_before_loading(monkeypatch, *overrides).startswith(message)


def test_empty_files_are_refused_naming_them_before_the_model_loads(monkeypatch, tmp_path):
    src, ref = tmp_path / "empty.de", tmp_path / "empty.en"
    src.write_text("")
    ref.write_text("")
    files = (f"src_file={src}", f"ref_file={ref}", f"output_dir={tmp_path / 'out'}")
    assert refused_before_loading(monkeypatch, *files) == (
        f"src_file={src} and ref_file={ref} hold no lines: give files with one sentence a line"
    )
    assert not (tmp_path / "out").exists()


def test_an_empty_split_and_an_unreadable_baseline_are_refused_before_translating(monkeypatch, tmp_path):
    """Found once the model has loaded (a split's files depend on its languages), but before any translating."""
    monkeypatch.setattr("qkvmt.api.Model.translate", lambda *a, **k: pytest.fail("it translated"))
    corpus = write_corpus(tmp_path / "corpus", sizes={"test_2016_flickr": 0})
    base = ("evaluate", "ckpt_path=multi30k-de-en")
    with pytest.raises(UserError, match="^split=test_2016_flickr holds no sentences"):
        evaluate(compose_inference(*base, f"data.root={corpus}", f"output_dir={tmp_path / 'a'}"))
    corrupt = tmp_path / "base.ckpt"
    corrupt.write_bytes(b"not a checkpoint")
    (tmp_path / "x.de").write_text("Ein Hund .\n")
    (tmp_path / "x.en").write_text("A dog .\n")
    files = (f"src_file={tmp_path / 'x.de'}", f"ref_file={tmp_path / 'x.en'}", f"output_dir={tmp_path / 'b'}")
    with pytest.raises(UserError, match=f"^baseline.ckpt_path={corrupt}: {corrupt} is not a readable checkpoint"):
        evaluate(compose_inference(*base, *files, f"baseline.ckpt_path={corrupt}"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
