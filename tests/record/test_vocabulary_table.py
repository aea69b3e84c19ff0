"""The vocabulary table: at each budget of the de->en CPU recipe where the joint BPE (no
data.tokenizer override) and another choice have counted runs, on one class of hardware, a row per
choice with its BLEU over seeds and its difference from the joint BPE's mean; runs that also change
the model, runs of other recipes or hardware, and uncounted runs stay out."""

from qkvmt.record.vocabulary_table import CHOICES, RECIPE, vocabularies
from tests.record.conftest import rows, train_run
from tests.record.test_ablation_table import record_of, tables_of

BUDGET = ["trainer.max_steps=1000", "trainer.max_time=null", "module.warmup_steps=300"]
SEPARATE = ("data/tokenizer=separate_bpe",)
SPM_BPE = ("data.tokenizer.model_type=bpe", "data/tokenizer=sentencepiece")


def run(id, bleu, chosen=(), budget=BUDGET, seed=1234, **extra):
    overrides = [*budget, *chosen]
    command = " ".join(["qkvmt train", f"experiment={RECIPE}", *budget, f"seed={seed}", *chosen])
    return train_run(id, bleu, experiment=RECIPE, overrides=overrides, steps=1000, seed=seed, command=command, **extra)


def test_each_choice_is_a_row_beside_the_joint_bpe_at_the_same_budget():
    text = vocabularies(
        record_of(
            run("j1", 34.0, seed=1, parameters=4_300_000),
            run("j2", 35.0, seed=2, parameters=4_300_000),
            run("s1", 33.0, SEPARATE, parameters=5_400_000),
            run("b1", 36.0, SPM_BPE, parameters=4_300_000),
            run("m", 20.0, SEPARATE, budget=[*BUDGET, "model.n_heads=1"], parameters=1),  # changes the model too
            run("busy", 12.0, ("data/tokenizer=sentencepiece",), disturbed=True, parameters=1),
            run("other", 11.0, ("data/tokenizer=sentencepiece",), hardware_class="cpu-y", parameters=1),
            train_run("else", 11.0, overrides=[*BUDGET, *SEPARATE]),  # another recipe
        )
    )
    assert f"`{' '.join(BUDGET)}`" in text
    (got,) = tables_of(text)
    assert [r[0] for r in got] == [CHOICES[()][0], CHOICES[SEPARATE][0], CHOICES[SPM_BPE][0]]  # CHOICES' order
    joint, separate, spm_bpe = got
    assert joint[2:6] == ["4.30 M", "2 (seeds 1, 2)", "34.50 (34.00–35.00)", ""]
    assert separate[2:6] == ["5.40 M", "1 (seed 1234)", "33.00", "-1.50"]
    assert spm_bpe[5] == "+1.50"
    assert separate[-1] == f"`qkvmt train experiment={RECIPE} {' '.join(BUDGET)} {SEPARATE[0]}`"


def test_without_the_joint_bpe_or_another_choice_there_is_no_table():
    none = "No vocabulary comparison is recorded yet."
    assert vocabularies(record_of(run("s", 33.0, SEPARATE, parameters=1))) == none
    assert vocabularies(record_of(run("j", 34.0, parameters=1))) == none
    assert rows(vocabularies(record_of(run("j", 34.0, parameters=1), run("s", 33.0, SEPARATE, parameters=1)))) != []
