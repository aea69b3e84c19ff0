"""A console that shows the run, not the libraries' housekeeping.

Known third-party noise is dropped narrowly, each by its category and message, so that any
other warning still shows: deprecations inside libraries that the user cannot act on, and
Lightning's advertising tips.
"""

import logging
import warnings

# (category, regex matched at the start of the message)
NOISY_WARNINGS = [
    # torch deprecated LeafSpec, which Lightning's _pytree still uses (lightning 2.6).
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    # Lightning's model summary sizes bf16 weights as float32; the parameter count is right.
    (UserWarning, r"Precision bf16-mixed is not supported by the model summary"),
    # torch deprecated its autograd collectives, which Lightning's strategy.all_gather still calls
    # (lightning 2.6, fabric.utilities.distributed): DDP runs gather at each checkpoint and after the test.
    (FutureWarning, r"torch\.distributed\.nn\.functional\.all_gather is deprecated"),
]
NOISY_LOG_PREFIXES = ("💡 Tip:",)  # Lightning's hints to install its cloud services
LIGHTNING_INFO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _DropPrefixes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(NOISY_LOG_PREFIXES)


def quiet_known_noise() -> None:
    """Install the filters; idempotent."""
    for category, message in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in LIGHTNING_INFO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropPrefixes) for f in logger.filters):
            logger.addFilter(_DropPrefixes())
