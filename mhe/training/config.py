"""A PEM-MHE experiment read from its ``torch-ude`` config, for front-ends other than the CLI.

`load_experiment` parses a config (``configs/mhe_*.yaml``) and command-line style overrides
exactly as ``torch-ude fit`` does and returns what the in-process `mhe.pem.PEMIdentifier`
needs, so a benchmark run of a config is the CLI run of that config.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch_ude.cli import main

from ..estimator.solver import SolverSettings
from ..identification import IdentificationProblem
from ..outer.outer import OuterSettings
from .module import PEMModule
from .data import IdentificationData

__all__ = ["PEMExperiment", "load_experiment"]


@dataclass(frozen=True)
class PEMExperiment:
    """One PEM-MHE experiment as the CLI would run it.

    Attributes:
        problem: the identification problem (``data.init_args.problem``).
        outer: the outer loop's settings (``model.init_args.outer``).
        solver: the window solver's settings (``model.init_args.solver``).
        max_steps: ``trainer.max_steps``, the iteration cap.
    """

    problem: IdentificationProblem
    outer: OuterSettings
    solver: SolverSettings
    max_steps: int


def load_experiment(config: str | Path | Sequence[str | Path], overrides: Sequence[str] = ()) -> PEMExperiment:
    """Parse a PEM-MHE config and overrides (e.g. ``["--trainer.max_steps", "5"]``) as ``torch-ude fit`` does.

    Args:
        config: a config, or several layered in order as ``torch-ude fit --config A --config B`` layers
            them (a later file overrides what it sets, e.g. a variant of a full config that holds only
            its differences).
        overrides: command-line style overrides, applied after the configs.

    Raises:
        ValueError: if the config does not describe a `PEMModule` on an `IdentificationData`.
    """
    configs = [config] if isinstance(config, (str, Path)) else list(config)
    cli = main([arg for c in configs for arg in ("--config", str(c))] + list(overrides), run=False)
    if not isinstance(cli.model, PEMModule) or not isinstance(cli.datamodule, IdentificationData):
        raise ValueError(f"{' + '.join(str(c) for c in configs)} must configure mhe.training.PEMModule on "
                         f"mhe.training.IdentificationData; got "
                         f"{type(cli.model).__name__} on {type(cli.datamodule).__name__}.")
    return PEMExperiment(cli.datamodule.problem, cli.model.outer, cli.model.solver_settings, cli.trainer.max_steps)
