"""PEM-MHE identification from partial measurements (CasADi + L4CasADi)."""

__all__: list[str] = []
