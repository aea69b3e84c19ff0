"""The settings that decide what a training run computes, as a run recorded them and as its recipe
composes them today. Where files are, how much memory a step holds and how fast it goes are left
out: they change no figure a recipe is judged by. A run counts for its recipe while the two agree;
a recipe changed since is caught by comparing them (tests/record/test_committed_pages.py, and
scripts/results.py when it adds a run)."""

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

KEYS = (
    "model.d_model",
    "model.ffn_dim",
    "model.encoder_layers",
    "model.decoder_layers",
    "model.n_heads",
    "model.dropout",
    "model.attention_dropout",
    "model.activation_dropout",
    "model.norm_first",
    "model.tie_embeddings",
    "model.positions",
    "data.src_lang",
    "data.tgt_lang",
    "data.vocab_size",
    "data.max_tokens",
    "module.optimizer.lr",
    "module.warmup_steps",
    "module.lr_schedule",
    "module.label_smoothing",
    "module.alignment.weight",
    "module.alignment.layer",
    "module.alignment.head",
    "module.alignment.full_context",
    "module.alignment.labels",
    "trainer.devices",
    "trainer.max_steps",
    "trainer.max_time",
    "test_checkpoint",
)


def pick(cfg: DictConfig) -> dict:
    """The KEYS a training config has, as plain values."""
    found = {key: OmegaConf.select(cfg, key, default=None) for key in KEYS}
    return {key: value for key, value in found.items() if value is not None}


def recipe_now(experiment: str, overrides: list[str], conf_dir: Path) -> dict:
    """The settings `python scripts/train.py experiment=<experiment> <overrides>` would train with
    today (only the overrides of KEYS matter, and only they are composed)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    given = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] in KEYS]
    args = {"config_name": "train", "overrides": [f"experiment={experiment}", *given, f"experiment_name={experiment}"]}
    if GlobalHydra.instance().is_initialized():  # inside a Hydra command: its search path is conf/ already
        return pick(compose(**args))
    with initialize_config_dir(config_dir=str(Path(conf_dir).resolve()), version_base="1.3"):
        return pick(compose(**args))


def differences(ran: dict, now: dict) -> list[str]:
    return [
        f"{key} was {ran.get(key)!r}, the recipe now gives {now.get(key)!r}"
        for key in sorted(set(ran) | set(now))
        if ran.get(key) != now.get(key)
    ]
