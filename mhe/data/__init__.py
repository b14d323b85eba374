"""Data: recordings and where they come from (simulators, log readers), the windows cut from them (Eq. 3)
and the input history. Builds on `mhe.models` only.
"""
