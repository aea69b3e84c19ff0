"""The model summary a training run logs as it starts: Lightning's table of modules, parameters
and modes without its FLOPs column and total, which Lightning fills only by running an example
input through the model (they read 0 for ours)."""

import logging

from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import _format_summary_table

log = logging.getLogger(__name__)


class ParameterSummary(ModelSummary):
    """Lightning's model summary (each module to `max_depth`: name, type, parameters, mode; the
    parameter totals and size), logged without the FLOPs column and total."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int = 0,
        **summarize_kwargs,
    ) -> None:
        log.info(
            "model summary:\n%s",
            parameter_table(summary_data, total_parameters, trainable_parameters, model_size, total_training_modes),
        )


def parameter_table(
    summary_data: list[tuple[str, list[str]]],
    total_parameters: int,
    trainable_parameters: int,
    model_size: float,
    total_training_modes: dict[str, int],
) -> str:
    """Lightning's own table (the one its summary prints) without the FLOPs column, and without
    its last line, the FLOPs total."""
    columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
    table = _format_summary_table(total_parameters, trainable_parameters, model_size, total_training_modes, 0, *columns)
    return table.rsplit("\n", 1)[0]
