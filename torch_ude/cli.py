"""The ``torch-ude`` console script: LightningCLI over every trainer of the project.

``torch-ude fit --config configs/pendulum_case_a.yaml [--data.noise 0.02] [--seed_everything 3]``
trains; ``validate`` and ``test`` evaluate a checkpoint (``--ckpt_path``). The model
and the data module are chosen in YAML by ``class_path``, so any importable
LightningModule / LightningDataModule (and any `System` plant) works unchanged.
"""
from __future__ import annotations

import lightning as L
from lightning.pytorch.cli import LightningCLI

__all__ = ["main", "console"]


def main(args: list[str] | None = None, run: bool = True) -> LightningCLI:
    """Run the CLI.

    Args:
        args: command-line arguments (default ``sys.argv[1:]``).
        run: run the subcommand (False: only parse and instantiate).

    Returns:
        The `LightningCLI` instance (its ``trainer``, ``model`` and ``datamodule``).
    """
    return LightningCLI(
        L.LightningModule, L.LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
        seed_everything_default=0, save_config_kwargs={"overwrite": True}, args=args, run=run,
    )


def console() -> None:
    """Entry point of the ``torch-ude`` script (returns None, so the exit status is 0 on success)."""
    main()


if __name__ == "__main__":
    console()
