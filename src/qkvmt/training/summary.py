"""The model summary a training run logs as it starts: Lightning's table of modules, parameters
and modes without its FLOPs column and total, which Lightning fills only by running an example
input through the model (they read 0 for ours)."""

import logging

from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.utilities.model_summary import get_formatted_model_size, get_human_readable_count

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
    columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
    widths = [max([len(name), *(len(str(v)) for v in values)]) for name, values in columns]
    rows = [[name for name, _ in columns], *zip(*(values for _, values in columns))]
    lines = [" | ".join(f"{str(v):<{w}}" for v, w in zip(row, widths)).rstrip() for row in rows]
    rule = "-" * max(len(line) for line in lines)
    totals = [
        (get_human_readable_count(trainable_parameters), "Trainable params"),
        (get_human_readable_count(total_parameters - trainable_parameters), "Non-trainable params"),
        (get_human_readable_count(total_parameters), "Total params"),
        (get_formatted_model_size(model_size), "Total estimated model params size (MB)"),
        (str(total_training_modes["train"]), "Modules in train mode"),
        (str(total_training_modes["eval"]), "Modules in eval mode"),
    ]
    return "\n".join([lines[0], rule, *lines[1:], rule, *(f"{n:<10}{what}" for n, what in totals)])
