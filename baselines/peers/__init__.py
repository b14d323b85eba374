"""Peers of jet matching on the same streams (extra ``peers``): PySINDy's sparse regression
(`sindy`), the solver baseline's UDE trained through torchdiffeq (`neural_ode`) and, in
`baselines.peers.pem` (extra ``mhe`` as well), PEM–MHE; `measure` runs any of them, or a
``torch-ude fit``, in a child process with its wall time and peak memory.
"""
from .measure import config_stream as config_stream, run_measured as run_measured
from .neural_ode import (
    GRADIENT_MODES as GRADIENT_MODES,
    TorchdiffeqObjective as TorchdiffeqObjective,
    torchdiffeq_fit as torchdiffeq_fit,
)
from .sindy import (
    DEGREES as DEGREES,
    DIFFERENTIATIONS as DIFFERENTIATIONS,
    SINDY_MODES as SINDY_MODES,
    SINDY_VARIANTS as SINDY_VARIANTS,
    THRESHOLDS as THRESHOLDS,
    WINDOWS as WINDOWS,
    SindyField as SindyField,
    SindySettings as SindySettings,
    choose as choose,
    choose_variants as choose_variants,
    sindy_fit as sindy_fit,
)

__all__ = [
    "SINDY_MODES", "DIFFERENTIATIONS", "SINDY_VARIANTS", "WINDOWS", "THRESHOLDS", "DEGREES", "SindySettings",
    "SindyField", "sindy_fit", "choose", "choose_variants", "GRADIENT_MODES", "TorchdiffeqObjective",
    "torchdiffeq_fit", "config_stream", "run_measured",
]
