"""A run's settings are compared with its recipe as conf/ composes it now, so a recipe changed
after its runs is noticed."""

from omegaconf import OmegaConf

from qkvmt.record import settings
from tests.conftest import CONF


def test_the_recipe_now_is_what_its_file_says_with_the_runs_overrides_on_top():
    experiment = OmegaConf.load(CONF / "experiment" / "multi30k_de_en_cpu.yaml")
    now = settings.recipe_now("multi30k_de_en_cpu", [], CONF)
    assert now["module.optimizer.lr"] == experiment.module.optimizer.lr
    assert now["trainer.max_time"] == experiment.trainer.max_time
    varied = settings.recipe_now(
        "multi30k_de_en_cpu",
        [
            "model.positions=rotary",
            "data.root=/elsewhere",
            "data.extra_train=[{src:$QKVMT_RWTH/de,tgt:$QKVMT_RWTH/en,repeat:6}]",
        ],
        CONF,
    )
    assert varied == {**now, "model.positions": "rotary"}  # the other overrides decide no setting


def test_differences_name_each_setting_that_changed():
    assert settings.differences({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == [
        "b was 2, the recipe now gives 3",
        "c was None, the recipe now gives 4",
    ]
    assert settings.differences({"a": 1}, {"a": 1}) == []


def test_only_the_settings_that_decide_a_runs_figures_are_picked():
    picked = settings.pick(OmegaConf.create({"model": {"d_model": 8, "name": "x"}, "data": {"root": "/r"}, "seed": 1}))
    assert picked == {"model.d_model": 8}
