"""Lightning integration of PEM-MHE: the problem's windows as a data module, the loop as a module, run files, and
a config's run in this process (`fit_pem`, `held_out_curve`)."""
from .config import PEMExperiment as PEMExperiment, load_experiment as load_experiment
from .module import PEMModule as PEMModule
from .outputs import pem_outputs as pem_outputs, write_pem_outputs as write_pem_outputs
from .data import IdentificationData as IdentificationData
from .fit import fit_pem as fit_pem, held_out_curve as held_out_curve
from .recorded import pem_identify as pem_identify

__all__ = ["IdentificationData", "PEMModule", "PEMExperiment", "fit_pem", "held_out_curve", "load_experiment",
           "pem_identify", "pem_outputs", "write_pem_outputs"]
