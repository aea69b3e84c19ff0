"""The machine a study or a run is recorded with, read from the machine that runs it."""

import datetime
import os


def this_machine() -> dict:
    """What a run folder does not record, read from the machine adding it (torch only then: the
    tables alone need none)."""
    import torch

    from qkvmt.host.hardware import detect

    return {
        "hardware": detect().to_dict(),
        "cores": os.cpu_count(),
        "amx": bool(torch.cpu._is_amx_tile_supported()),
        "torch": torch.__version__,
    }


def recorded_with() -> dict:
    """What a study records of where and when it ran, for `qkvmt results add=<its folder>`."""
    import torch

    return {
        "machine": this_machine(),
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }
