"""The estimator: the MHE (Eq. 4, 6), its KKT points and NLP, the window solver, the KKT system and its
block-tridiagonal solve (Eq. 11, Prop. 1-2), and the arrival-cost box. Builds on `mhe.models` and `mhe.data`.
"""
