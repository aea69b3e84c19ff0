"""A setting of the wrong type is one line naming the key and the type it takes, for every
command, before the command runs (qkvmt.setting_types, called by every subcommand's main)."""

import logging
import sys

import pytest

from qkvmt.analysis.signals import SIGNALS, cross_signals
from qkvmt.cli.main import main
from qkvmt.cli.table import COMMANDS
from qkvmt.setting_types import check_setting_types
from tests.commandline import run_python, user_error
from tests.conftest import CONF, compose_inference, compose_train


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["translate", "ckpt_path=multi30k-de-en", "sentence=x", "decode.beam_size=abc"],
            "decode.beam_size='abc': give a whole number (int)",
        ),
        (
            ["evaluate", "ckpt_path=multi30k-de-en", "decode.use_cache=3"],
            "decode.use_cache=3: give true or false (bool)",
        ),
        (
            ["align", "ckpt_path=multi30k-de-en", "sentence=x", "decode.len_penalty=true"],
            "decode.len_penalty=true: give a number (float)",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line_naming_the_key_and_its_type(args, line, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["qkvmt"])
    with pytest.raises(SystemExit) as stop:
        main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err and err.strip().splitlines()[-1] == f"error: {line}"


def test_a_training_setting_of_the_wrong_type_leaves_no_run_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["qkvmt"])
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        main(["train", "experiment=multi30k_de_en_cpu", "model.ffn_dim=wide", f"hydra.run.dir={run}"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: model.ffn_dim='wide': give a whole number (int)"
    assert not run.exists()
    # nor a log handler on the removed train.log, which the next record would reopen in a folder that is gone
    handlers = [
        h
        for lg in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
        for h in getattr(lg, "handlers", [])
    ]
    assert not [h for h in handlers if isinstance(h, logging.FileHandler) and h.baseFilename.startswith(str(run))]


def test_the_shipped_configurations_hold_settings_of_their_types():
    """No default is refused: every command's configuration and every recipe passes the check."""
    commands_configs = sorted({c.config for c in COMMANDS.values()})
    for name in commands_configs:
        check_setting_types(compose_inference(name))
    for recipe in sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")):
        check_setting_types(compose_train(f"experiment={recipe}"))


@pytest.mark.parametrize(
    "args, line",
    [
        (["translate", "batch_lines=0"], "batch_lines=0: give a whole number of at least 1"),
        (["evaluate", "attention.num_samples=-1"], "attention.num_samples=-1: give a whole number of at least 0"),
        (["align", "gold_dir=.", "gold_dev=-1"], "gold_dev=-1: give a whole number of at least 0"),
        (["inspect", "sentence=x", "top_k=0"], "top_k=0: give a whole number of at least 1"),
        (["inspect", "sentence=x", "kind=self"], "kind='self': use one of encoder, decoder, cross"),
        (["heads", "prune_points=abc"], "prune_points='abc': give a whole number of at least 0"),
        (["faithfulness", "seed=-1"], "seed=-1: give a whole number of at least 0"),
        (["inspect", "sentence=x", "layer=true"], "layer=true: give a whole number"),
        (["figures", "head.layer=true"], "head.layer=true: give a whole number"),
        (["figures", "explorer.signal=abc"], "explorer.signal='abc': use one of " + ", ".join(SIGNALS)),
        (["average", "average=5"], "average=5: use lastN (e.g. last5) or a list of checkpoint paths"),
        (
            ["faithfulness", "signals=abc"],
            "signals: 'abc' is not a signal with cross-attention maps: use some of " + ", ".join(cross_signals()),
        ),
        (
            ["faithfulness", "signals=-1"],
            "signals=-1: list some of " + ", ".join(cross_signals()) + ", or null for all",
        ),
        (
            ["evaluate", "attention.signals=true"],
            "attention.signals=true: list some of " + ", ".join(SIGNALS) + ", or null for all",
        ),
        (
            ["align", "sentence=x", "alignment.head=abc"],
            "alignment.head='abc': use mean, best, or a head's number from 0",
        ),
        (
            ["align", "sentence=x", "alignment.signal=true"],
            "alignment.signal=true: use one of " + ", ".join(cross_signals()),
        ),
        (
            ["align", "sentence=x", "alignment.drop=1e99"],
            "alignment.drop=1e+99: name tokens to leave out, e.g. [</s>,punctuation], or []",
        ),
    ],
)
def test_a_commands_bad_setting_is_refused_before_its_model_loads(args, line, tmp_path):
    """A checkpoint that does not exist would be the error if the model loaded first; run where
    a command writes by default (figures: docs/figures under it), it leaves nothing behind."""
    r = run_python("-m", "qkvmt", *args, "ckpt_path=none.ckpt", cwd=tmp_path)
    assert user_error(r) == f"error: {line}"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, line",
    [
        (["translate", "sentence=x", "ckpt_path=true"], "checkpoint not found: true; set ckpt_path to"),
        (["align", "sentence=x", "ckpt_path=multi30k-de-en", "reverse_ckpt_path=0"], "checkpoint not found: 0; "),
        (["faithfulness", "ckpt_path=none.ckpt", "aer_file=0"], "aer_file=0 is not readable as the aer.json"),
        (["average", "ckpt_path=none.ckpt", "output=-1"], "output=-1 is a folder: give the path of the file"),
    ],
)
def test_a_path_typed_as_a_number_or_a_flag_is_that_path(args, line, tmp_path):
    """The command line reads ckpt_path=true as a flag and output=-1 as a number: each is a file's name all the
    same, where it was a traceback. A folder -1 is there, which average's output= must not be."""
    (tmp_path / "-1").mkdir()
    r = run_python("-m", "qkvmt", *args, cwd=tmp_path)
    assert user_error(r).startswith(f"error: {line}")
    assert [p.name for p in tmp_path.iterdir()] == ["-1"]
