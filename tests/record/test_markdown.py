"""Recorded commands are shown as they are typed now."""

from qkvmt.commands import COMMANDS
from qkvmt.record.markdown import command


def test_a_recorded_script_reads_as_the_subcommand_it_is_the_alias_of():
    for c in COMMANDS.values():  # scripts/<config>.py runs `qkvmt <name>`
        assert command(f"X=1 python scripts/{c.config}.py a=b") == f"`X=1 qkvmt {c.name} a=b`"
    assert command("qkvmt evaluate ckpt_path=y") == "`qkvmt evaluate ckpt_path=y`"
    assert command("bash scripts/device/measure.sh en_de") == "`bash scripts/device/measure.sh en_de`"
