"""Solver-based UDE baselines: RK4 multiple shooting with a hand-derived discrete adjoint."""

__all__: list[str] = []
