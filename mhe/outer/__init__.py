"""The outer loop: PEM steps (Adam, L-BFGS, Gauss-Newton), the noise fit, the free-run criterion and the run
report. Builds on `mhe.estimator`, `mhe.data` and `mhe.models`; not on `mhe.identification`.
"""
