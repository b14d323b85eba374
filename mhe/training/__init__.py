"""Lightning integration of PEM-MHE: window data module, manual-optimization PEM module, run outputs."""
from .data import RacingWindows as RacingWindows, WindowIndices as WindowIndices
from .module import PEMModule as PEMModule
from .outputs import write_pem_outputs as write_pem_outputs

__all__ = ["RacingWindows", "WindowIndices", "PEMModule", "write_pem_outputs"]
