"""Free text on the command line reaches the config unchanged."""

from hydra import compose, initialize_config_dir

from qkvmt.cli import quote_text_overrides
from tests.conftest import CONF

TEXTS = [
    "Ein Mann fährt Fahrrad .", "Ein Mann, der lacht.", "der Mann's Hut", r"a \ b", "x=y [z]", "ends \\", "q\\'s",
    '"Komm", sagte er, "schnell"', "'zitiert'", "Preis ${x}",
]


def test_quoted_overrides_parse_back_to_the_exact_text():
    for text in TEXTS:
        args = quote_text_overrides([f"sentence={text}", f"reference={text}", "decode.beam_size=2"])
        assert args[2] == "decode.beam_size=2"  # other overrides untouched
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="align", overrides=args)
        assert cfg.sentence == text and cfg.reference == text
