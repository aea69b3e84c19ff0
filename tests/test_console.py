"""Known third-party noise is filtered narrowly: other warnings and log lines still show."""

import logging
import warnings

import torch
import torch.distributed as dist
import torch.utils._pytree as pytree
from lightning.fabric.utilities.distributed import _all_gather_ddp_if_available
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from qkvmt.console import quiet_known_noise


def test_known_deprecation_is_dropped_and_other_warnings_are_kept():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_known_noise()
        pytree.LeafSpec()  # torch's own deprecation warning, as Lightning triggers it
        warnings.warn("some other library change", FutureWarning)
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated", DeprecationWarning)  # other category
    assert [str(w.message) for w in caught] == [
        "some other library change",
        "`isinstance(treespec, LeafSpec)` is deprecated",
    ]


def test_lightnings_all_gather_deprecation_is_dropped_and_torchs_others_are_kept():
    # strategy.all_gather in a DDP run (at each checkpoint, after the test), in a one-process group
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet_known_noise()
            gathered = _all_gather_ddp_if_available(torch.arange(3.0))
            torch.distributed.nn.functional.all_reduce(torch.ones(2))  # another deprecated collective
    finally:
        dist.destroy_process_group()
    assert gathered.tolist() == [[0.0, 1.0, 2.0]]  # it did gather
    assert [str(w.message).split(",")[0] for w in caught] == [
        "torch.distributed.nn.functional.all_reduce is deprecated"
    ]


def test_lightning_tips_are_dropped_and_its_other_info_is_kept(caplog):
    quiet_known_noise()
    quiet_known_noise()  # idempotent: one filter, not two
    with caplog.at_level(logging.INFO):
        rank_zero_info("💡 Tip: For seamless cloud logging, try installing something")
        rank_zero_info("GPU available: False, used: False")
    assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False"]
    assert len(logging.getLogger("lightning.pytorch.utilities.rank_zero").filters) == 1
