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
    THRESHOLDS as THRESHOLDS,
    WINDOWS as WINDOWS,
    SindyField as SindyField,
    SindySettings as SindySettings,
    choose as choose,
    sindy_fit as sindy_fit,
)

__all__ = [
    "SINDY_MODES", "DIFFERENTIATIONS", "WINDOWS", "THRESHOLDS", "DEGREES", "SindySettings", "SindyField", "sindy_fit",
    "choose", "GRADIENT_MODES", "TorchdiffeqObjective", "torchdiffeq_fit", "config_stream", "run_measured",
]
