"""Free text on the command line reaches the config unchanged."""

from hydra import compose, initialize_config_dir

from qkvmt.cli import CPU_EXPERIMENT, quote_text_overrides, with_default_experiment
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
    assert with_default_experiment(argv, has_gpu=False) == [*argv, f"experiment={CPU_EXPERIMENT}"]
    assert f"running experiment={CPU_EXPERIMENT}" in capsys.readouterr().err
    assert with_default_experiment(argv, has_gpu=True) == argv  # the GPU recipe, train.yaml's default


def test_an_explicit_experiment_always_wins():
    for given in ("experiment=multi30k_en_de", "+experiment=multi30k_en_de"):
        argv = ["scripts/train.py", given]
        assert with_default_experiment(argv, has_gpu=False) == argv
