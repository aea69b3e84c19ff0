"""Free text on the command line reaches the config unchanged."""

import sys

import pytest
from hydra import compose, initialize_config_dir

from qkvmt.cli.hydra_main import CPU_EXPERIMENT, quote_text_overrides, with_default_experiment
from qkvmt.cli.main import main
from tests.conftest import CONF

TEXTS = [
    "Ein Mann fährt Fahrrad .",
    "Ein Mann, der lacht.",
    "der Mann's Hut",
    r"a \ b",
    "x=y [z]",
    "ends \\",
    "q\\'s",
    '"Komm", sagte er, "schnell"',
    "'zitiert'",
    "Preis ${x}",
]


def test_quoted_overrides_parse_back_to_the_exact_text():
    for text in TEXTS:
        args = quote_text_overrides([f"sentence={text}", f"reference={text}", "decode.beam_size=2"])
        assert args[2] == "decode.beam_size=2"  # other overrides untouched
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="align", overrides=args)
        assert cfg.sentence == text and cfg.reference == text


def test_without_a_gpu_train_defaults_to_the_cpu_recipe_and_says_so(capsys):
    argv = ["scripts/train.py", "trainer.max_steps=5"]
    assert with_default_experiment(argv, has_gpu=False) == [argv[0], f"experiment={CPU_EXPERIMENT}", *argv[1:]]
    assert f"running experiment={CPU_EXPERIMENT}" in capsys.readouterr().err
    assert with_default_experiment(argv, has_gpu=True) == argv  # the GPU recipe, train.yaml's default


def test_an_explicit_experiment_always_wins():
    for given in ("experiment=multi30k_en_de", "+experiment=multi30k_en_de"):
        argv = ["scripts/train.py", given]
        assert with_default_experiment(argv, has_gpu=False) == argv


DEFAULT = f"experiment={CPU_EXPERIMENT}"


@pytest.mark.parametrize(
    "args, placed",
    [
        (["trainer.max_steps=1", "--help"], [DEFAULT, "trainer.max_steps=1", "--help"]),
        (["init_from=X", "--cfg", "job"], [DEFAULT, "init_from=X", "--cfg", "job"]),
        (["--cfg", "job", "init_from=X"], ["--cfg", "job", DEFAULT, "init_from=X"]),
        (["-c", "job", "a=1", "b=2", "-m"], ["-c", "job", DEFAULT, "a=1", "b=2", "-m"]),
        (["--help"], [DEFAULT, "--help"]),
        (["--info"], [DEFAULT, "--info"]),  # last, --info would take it as its value
        ([], [DEFAULT]),
    ],
)
def test_the_cpu_recipe_goes_among_the_users_overrides_never_after_a_flag(args, placed):
    assert with_default_experiment(["train.py", *args], has_gpu=False) == ["train.py", *placed]


@pytest.mark.parametrize(
    "args", [["trainer.max_steps=1", "--cfg", "job"], ["init_from=X", "--cfg", "job"], ["--cfg", "job", "seed=7"]]
)
def test_train_without_a_gpu_takes_a_setting_before_or_after_hydras_flags(args, monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["qkvmt"])  # main sets it, as the command line it runs
    main(["train", *args])  # --cfg job: the composed config, nothing run
    out = capsys.readouterr().out
    assert "for CPUs: a 3+3-layer" in out  # the CPU recipe's description
    assert ("max_steps: 1" in out) + ("init_from: X" in out) + ("seed: 7" in out) == 1
