"""Lightning integration of PEM-MHE: the problem's windows as a data module, the loop as a module, run files."""
from .config import PEMExperiment as PEMExperiment, load_experiment as load_experiment
from .module import PEMModule as PEMModule
from .outputs import pem_outputs as pem_outputs, write_pem_outputs as write_pem_outputs
from .data import IdentificationData as IdentificationData
from .recorded import pem_identify as pem_identify

__all__ = ["IdentificationData", "PEMModule", "PEMExperiment", "load_experiment", "pem_outputs", "write_pem_outputs",
           "pem_identify"]
