"""Recorded commands are shown as they are typed now."""

import os
import subprocess

from qkvmt.cli.table import COMMANDS
from qkvmt.record.markdown import train_command
from qkvmt.results.markdown import command


def test_a_recorded_script_reads_as_the_subcommand_it_is_the_alias_of():
    for c in COMMANDS.values():  # scripts/<config>.py runs `qkvmt <name>`
        assert command(f"X=1 python scripts/{c.config}.py a=b") == f"`X=1 qkvmt {c.name} a=b`"
    assert command("qkvmt evaluate ckpt_path=y") == "`qkvmt evaluate ckpt_path=y`"
    assert command("bash scripts/device/measure.sh en_de") == "`bash scripts/device/measure.sh en_de`"


def test_a_shown_override_reaches_hydra_as_meant_through_a_real_shell():
    """The tables' commands are copied into a shell: an environment variable must still expand
    there, and brackets, braces, commas, spaces, quotes and Hydra's own ${...} must not be the
    shell's."""
    env = {"PATH": os.environ["PATH"], "QKVMT_RWTH": "/gold dir/rwth", "HOME": "/home/h"}
    rwth = "data.extra_train=[{src:$QKVMT_RWTH/de,tgt:$QKVMT_RWTH/en,repeat:6}]"
    interpolated = "data.extra_train=[{src:${oc.env:QKVMT_RWTH}/de,tgt:b}]"
    cases = {
        rwth: rwth.replace("$QKVMT_RWTH", env["QKVMT_RWTH"]),
        interpolated: interpolated,
        "trainer.devices=[0, 1]": "trainer.devices=[0, 1]",
        'description="at $HOME `x` \\ y"': 'description="at /home/h `x` \\ y"',
        "model.positions=rotary": "model.positions=rotary",
    }
    for override, reaches in cases.items():
        shown = train_command("r", [override])
        argv = subprocess.run(
            ["bash", "-c", f"printf '%s\\n' {shown}"], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert argv == ["qkvmt", "train", "experiment=r", reaches], (override, shown)
