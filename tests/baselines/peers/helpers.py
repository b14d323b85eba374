"""The configs the peer tests stream from."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CASE_A, FRICTION = ROOT / "configs" / "pendulum_case_a.yaml", ROOT / "configs" / "friction_pendulum.yaml"
