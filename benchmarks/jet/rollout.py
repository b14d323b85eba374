"""8 s autonomous rollouts of learned fields against the true pendulum and f_known alone.

    python -m benchmarks.jet.rollout --runs results/jet_cases/A_0 ... [--v1-runs results/jet_noise_sweep/v1_0.01_0 ...]

Each run folder holds an exported ``field.pt``. Initial states: x0 = (1.2, 0) and seven
more on energy levels inside it (`torch_ude.systems.SinglePendulum.rollout_states`).
Writes results/jet_rollout/jet_rollout.json and a PNG.
"""
from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import save, summarize  # noqa: E402
from torch_ude import SinglePendulum, load_field, rk4_rollout, rollout_error  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    """Evaluate rollouts and save JSON + PNG."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", nargs="+", required=True, help="v2 run folders (Case A)")
    ap.add_argument("--v1-runs", nargs="*", default=[])
    ap.add_argument("--horizon", type=float, default=8.0)
    args = ap.parse_args(argv)
    plant = SinglePendulum()
    true, known = plant.true_field(), plant.known_field("A")
    x0 = plant.rollout_states()
    e_known = rollout_error(known, true, x0, args.horizon)
    out = {"horizon_s": args.horizon, "x0": x0.tolist(), "f_known": e_known, "v2": {}, "v1": {}}
    for key, runs in (("v2", args.runs), ("v1", args.v1_runs)):
        for run in runs:
            field, _ = load_field(run)
            out[key][run] = rollout_error(field, true, x0, args.horizon)
            print(f"{key} {run}: rollout error {out[key][run]:.5f} (f_known alone {e_known:.4f})", flush=True)
    out["summary"] = {k: summarize(list(out[k].values())) for k in ("v2", "v1") if out[k]}
    if "v2" in out["summary"]:
        out["summary"]["f_known_over_v2"] = e_known / out["summary"]["v2"]["mean"]
    folder = save("jet_rollout", out)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    h, steps = 0.01, round(args.horizon / 0.01)
    t = torch.arange(steps + 1) * h
    ref = rk4_rollout(true, x0[:1], h, steps, 10)[:, 0, 0]
    ax.plot(t, ref, "k", lw=1.5, label="true")
    ax.plot(t, rk4_rollout(known, x0[:1], h, steps, 10)[:, 0, 0], "--", label="f_known")
    field, _ = load_field(args.runs[0])
    with torch.no_grad():
        ax.plot(t, rk4_rollout(field, x0[:1], h, steps, 10)[:, 0, 0], ":", label="learned (v2)")
    ax.set(xlabel="t [s]", ylabel="theta [rad]", title="autonomous rollout from x0 = (1.2, 0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "jet_rollout.png", dpi=120)
    print(f"saved {folder}")


if __name__ == "__main__":
    main()
