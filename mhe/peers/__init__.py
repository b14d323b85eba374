"""Peers of PEM-MHE (Table 1 and the comparisons): EKF, one-step PEM on given states, joint MHE, Deep
Dynamics, Cramer-Rao bounds. Builds on `mhe.identification` and every room below it.
"""
