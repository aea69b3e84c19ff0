"""align.py and the explorer with two models, one per direction: reverse_ckpt_path=auto (the
default) pairs a bundled model with the bundled model of the other direction; settings that read
one model's own heads keep that model alone, and beside an explicit reverse model are refused."""

import json
from dataclasses import replace

import pytest

import qkvmt
import qkvmt.bundled as bundled
from qkvmt.alignment.directions import Direction, both_ways
from qkvmt.alignment.links import to_pharaoh
from qkvmt.alignment.symmetrize import symmetrize
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.explore.session import Explorer
from qkvmt.model.weights_folder import add_provenance, write_weights_folder
from qkvmt.pipeline.align import align
from qkvmt.pipeline.align_settings import reverse_checkpoint
from qkvmt.pipeline.inference_setup import checkpoint_paths
from qkvmt.text.tokenizer import train_bpe
from tests.bundled.test_bundled import PROVENANCE
from tests.conftest import compose_inference
from tests.model.test_weights_folder import nontrivial_model
from tests.pipeline.test_align import write_gold

SOURCE, TARGET = "w1 w2 w3 w4", "w4 w3 w2"


def shelve(shelf, name, model, tokenizer, meta):
    folder = shelf / name
    folder.mkdir(parents=True)
    write_weights_folder(model, tokenizer, meta, folder, "float16")
    add_provenance(folder, PROVENANCE)
    return folder


def shelf_of_two(shelf, monkeypatch, supervised: bool = True) -> dict:
    """A bundled-model shelf of two toy models, de->en and en->de, trained on one joint BPE, each
    with a supervised aligning head (layer 1, head 0) as the bundled models have, or without."""
    forward, tokenizer, meta = nontrivial_model(0)
    reverse, same, _ = nontrivial_model(1)
    assert same.to_str() == tokenizer.to_str() and meta.alignment
    meta = meta if supervised else replace(meta, alignment=None)
    folders = {
        "toy-de-en": shelve(shelf, "toy-de-en", forward, tokenizer, meta),
        "toy-en-de": shelve(shelf, "toy-en-de", reverse, tokenizer, replace(meta, src_lang="en", tgt_lang="de")),
    }
    monkeypatch.setattr(bundled, "HERE", shelf)
    return folders


@pytest.fixture
def pair(tmp_path, monkeypatch):
    return shelf_of_two(tmp_path / "shelf", monkeypatch)


def test_a_bundled_model_pairs_with_the_bundled_model_of_the_other_direction_and_vocabulary(
    pair, tmp_path, monkeypatch
):
    assert bundled.reverse_of(pair["toy-de-en"]) == pair["toy-en-de"]
    assert bundled.reverse_of(pair["toy-en-de"]) == pair["toy-de-en"]
    assert bundled.reverse_of(tmp_path) is None  # not a bundled model
    # a model of the other direction with another vocabulary is no partner: its links could not pair
    model, tokenizer, meta = nontrivial_model()
    other = train_bpe([" ".join(f"v{i}" for i in range(k, 30)) for k in range(30)], vocab_size=60, min_frequency=1)
    lonely = tmp_path / "lonely"
    shelve(lonely, "toy-de-en", model, tokenizer, meta)
    shelve(lonely, "toy-en-de", model, other, replace(meta, src_lang="en", tgt_lang="de"))
    monkeypatch.setattr(bundled, "HERE", lonely)
    assert bundled.reverse_of(lonely / "toy-de-en") is None


def test_align_of_a_bundled_model_symmetrizes_with_its_reverse_unless_told_otherwise(pair, tmp_path):
    def aligned(name, *given):
        out = tmp_path / name
        align(
            compose_inference(
                "align",
                "ckpt_path=toy-de-en",
                f"sentence='{SOURCE}'",
                f"reference='{TARGET}'",
                f"output_dir={out}",
                *given,
            )
        )
        return json.loads((out / "alignment.json").read_text())

    auto = aligned("auto", "symmetrize_threshold=0.1")
    f, r = ({tuple(x) for x in auto[k]} for k in ("forward_links", "reverse_links"))
    assert f and r and auto["symmetrize"] == "soft-mean" and auto["symmetrize_threshold"] == 0.1
    assert {auto["policies"][k]["layer"] for k in ("forward", "reverse")} == {1}  # the supervised heads
    forward, reverse = (qkvmt.load(f"toy-{p}", device="cpu") for p in ("de-en", "en-de"))
    both = both_ways(Direction(forward), Direction(reverse), SOURCE, TARGET, TARGET)
    assert {tuple(x) for x in auto["links"]} == both.links("soft-mean", 0.1) != set()
    hard = aligned("hard", "symmetrize=grow-diag-final-and")
    assert hard["symmetrize"] == "grow-diag-final-and" and "symmetrize_threshold" not in hard
    assert {tuple(x) for x in hard["links"]} == symmetrize(f, r, "grow-diag-final-and")
    page = Explorer(forward, reverse, threshold=0.1)
    assert (page.method, page.threshold) == ("soft-mean", 0.1) and Explorer(forward, reverse).threshold == 0.3
    # reading another signal or rows than the heads were taught on, auto keeps the hard method
    other = aligned("other", "alignment.signal=value_norms")
    assert other["symmetrize"] == "grow-diag-final-and"
    assert auto["reverse_ckpt_path"] == [str(pair["toy-en-de"])]
    assert aligned("explicit", "reverse_ckpt_path=toy-en-de", "symmetrize_threshold=0.1")["links"] == auto["links"]
    # reverse_ckpt_path=null: this model alone, as Model.align links it
    alone = aligned("alone", "reverse_ckpt_path=null")
    model = qkvmt.load("toy-de-en", device="cpu")
    assert alone["links"] == [list(x) for x in model.align(SOURCE, TARGET).links] and "reverse_links" not in alone
    # a setting that reads this model's own head keeps it alone
    layer = aligned("layer", "alignment.layer=0", "alignment.head=1")
    assert layer["policy"]["layer"] == 0 and layer["policy"]["head"] == 1 and "reverse_links" not in layer
    # rows and signal are read from both models alike
    reading = aligned("reading", "alignment.rows=reading", "alignment.signal=value_norms")
    assert {reading["policies"][k]["rows"] for k in ("forward", "reverse")} == {"reading"}
    assert {reading["policies"][k]["signal"] for k in ("forward", "reverse")} == {"value_norms"}


def test_two_models_without_a_supervised_head_are_symmetrized_from_their_links(tmp_path, monkeypatch):
    """symmetrize=auto with plain attention: grow-diag-final-and of the two directions' links (its
    spread weights would reach soft-mean's threshold on almost no link), on the page too."""
    shelf_of_two(tmp_path / "plain", monkeypatch, supervised=False)
    out = tmp_path / "o"
    align(
        compose_inference(
            "align", "ckpt_path=toy-de-en", f"sentence='{SOURCE}'", f"reference='{TARGET}'", f"output_dir={out}"
        )
    )
    plain = json.loads((out / "alignment.json").read_text())
    f, r = ({tuple(x) for x in plain[k]} for k in ("forward_links", "reverse_links"))
    assert plain["symmetrize"] == "grow-diag-final-and" and "symmetrize_threshold" not in plain
    assert {tuple(x) for x in plain["links"]} == symmetrize(f, r, "grow-diag-final-and") and f and r
    forward, reverse = (qkvmt.load(f"toy-{p}", device="cpu") for p in ("de-en", "en-de"))
    assert Explorer(forward, reverse).method == "grow-diag-final-and"
    assert Explorer(forward, reverse, "soft-mean").method == "soft-mean"


@pytest.mark.parametrize(
    "given",
    [
        ["alignment.layer=1"],
        ["alignment.head=mean"],
        ["alignment.direction=intersection"],
        ["leaderboard=true", "gold_dir=gold"],
    ],
)
def test_a_reading_of_one_models_heads_beside_an_explicit_reverse_is_refused_before_loading(given, pair, tmp_path):
    cfg = compose_inference(
        "align",
        "ckpt_path=toy-de-en",
        "reverse_ckpt_path=toy-en-de",
        "sentence=w1",
        f"output_dir={tmp_path / 'o'}",
        *given,
    )
    with pytest.raises(UserError, match=rf"^{given[0]} reads one model's own heads, .*reverse_ckpt_path=null"):
        align(cfg)
    assert not (tmp_path / "o").exists()


def test_a_run_checkpoint_has_no_partner_and_the_explorer_pairs_bundled_models(pair, tmp_path):
    run_ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    cfg = compose_inference("explore", f"ckpt_path={run_ckpt}")
    assert reverse_checkpoint(cfg, [run_ckpt]) is None
    cfg = compose_inference("explore", "ckpt_path=toy-de-en")
    assert reverse_checkpoint(cfg, checkpoint_paths(cfg)) == pair["toy-en-de"]
    cfg = compose_inference("explore", "ckpt_path=toy-de-en", "reverse_ckpt_path=null")
    assert reverse_checkpoint(cfg, checkpoint_paths(cfg)) is None


def test_a_corpus_of_a_bundled_model_is_linked_both_ways(pair, tmp_path):
    (tmp_path / "c.de").write_text(f"{SOURCE}\nw5 w6\n")
    (tmp_path / "c.en").write_text(f"{TARGET}\nw6 w5\n")
    common = ["ckpt_path=toy-de-en", f"src_file={tmp_path / 'c.de'}", f"tgt_file={tmp_path / 'c.en'}"]
    align(compose_inference("align", *common, f"output_dir={tmp_path / 'auto'}"))
    summary = json.loads((tmp_path / "auto" / "corpus.json").read_text())
    assert summary["reverse_ckpt_path"] == [str(pair["toy-en-de"])] and summary["aligned"] == 2
    assert (summary["symmetrize"], summary["symmetrize_threshold"]) == ("soft-mean", 0.3)
    forward, reverse = (Direction(qkvmt.load(f"toy-{p}", device="cpu")) for p in ("de-en", "en-de"))
    expected = [
        both_ways(forward, reverse, s, t, t).links("soft-mean", 0.3) for s, t in ((SOURCE, TARGET), ("w5 w6", "w6 w5"))
    ]
    assert (tmp_path / "auto" / "alignment.pharaoh").read_text() == "".join(to_pharaoh(x) + "\n" for x in expected)
    align(compose_inference("align", *common, "reverse_ckpt_path=null", f"output_dir={tmp_path / 'alone'}"))
    assert "reverse_ckpt_path" not in json.loads((tmp_path / "alone" / "corpus.json").read_text())


def test_gold_links_score_both_directions_by_default_and_one_model_keeps_its_best_head(pair, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a bundled model's results home, outputs/pretrained/NAME, lands here
    gold = write_gold(tmp_path / "gold", [(SOURCE.split(), TARGET.split(), "1-3 2-2 3-1 4p1")])
    both = align(compose_inference("align", "ckpt_path=toy-de-en", f"gold_dir={gold}", f"output_dir={tmp_path / 'b'}"))
    assert set(both["by_method"]) >= {"forward", "reverse", "grow-diag-final-and"} and both["n"] == 1
    scored = json.loads((tmp_path / "b" / "aer.json").read_text())
    assert scored["symmetrize"] == "soft-mean" and scored["symmetrized"] == scored["by_method"]["soft-mean@0.3"]
    alone = compose_inference(
        "align", "ckpt_path=toy-de-en", f"gold_dir={gold}", "reverse_ckpt_path=null", f"output_dir={tmp_path / 'a'}"
    )
    assert align(alone)["best"] and "by_method" not in json.loads((tmp_path / "a" / "aer.json").read_text())
    # the best head is kept beside the bundled model's results, for alignment.head=best
    (kept,) = (tmp_path / "outputs" / "pretrained" / "toy-de-en").glob("aer_*.json")
    assert json.loads(kept.read_text())["best"] == json.loads((tmp_path / "a" / "aer.json").read_text())["best"]


def test_a_bad_symmetrization_of_a_bundled_pair_is_refused_before_loading(pair, tmp_path, monkeypatch):
    monkeypatch.setattr(Model, "from_checkpoints", lambda *a, **k: pytest.fail("a model was loaded"))
    cfg = compose_inference(
        "align", "ckpt_path=toy-de-en", "sentence=w1", "symmetrize=soft-max", f"output_dir={tmp_path / 'o'}"
    )
    with pytest.raises(UserError, match=r"^symmetrize='soft-max': use auto or one of .*soft-mean$"):
        align(cfg)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "given, message",
    [
        # a threshold beside a hard method, or beside auto where it chose one, could not take effect
        (["symmetrize=intersection", "symmetrize_threshold=0.2"], r"symmetrize_threshold=0.2 is read by the soft "),
        (["alignment.signal=value_norms", "symmetrize_threshold=0.2"], r"symmetrize=auto chose grow-diag-final-and"),
        # a symmetrization with one model
        (["reverse_ckpt_path=null", "symmetrize=soft-mean"], r"^symmetrize=soft-mean combines the links of two models"),
        (["alignment.layer=1", "symmetrize_threshold=0.2"], r"^symmetrize_threshold=0.2 combines the links of two "),
    ],
)
def test_a_symmetrization_that_could_not_take_effect_is_refused(given, message, pair, tmp_path):
    cfg = compose_inference("align", "ckpt_path=toy-de-en", "sentence=w1", f"output_dir={tmp_path / 'o'}", *given)
    with pytest.raises(UserError, match=message) as e:
        align(cfg)
    assert "\n" not in str(e.value) and not (tmp_path / "o").exists()
    model = qkvmt.load("toy-de-en", device="cpu")
    with pytest.raises(UserError, match="give a reverse model"):
        Explorer(model, None, "soft-mean")
