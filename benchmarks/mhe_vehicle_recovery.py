"""Physics-only PEM-MHE on the simulated racing car: parameter recovery from about 50 % off.

Section 4.1 / 4.3 test problem: BayesRace ground truth, our simulator with process and
measurement noise, y = (vx, omega), vy unmeasured. The identification model starts
with every identified parameter at truth * (1 +- 0.5) and Er fixed at 0 (not
identified, see mhe.vehicle). Optionally (``--crlb``) the Cramer-Rao standard deviations
of the relative parameter errors at the truth are computed from the exact residual
Jacobian (`mhe.gauss_newton.residual_jacobian`), which tells which parameters the data can
pin. ``--optimizer gauss_newton`` runs the Levenberg-Marquardt outer loop instead of Adam;
it verifies accepted steps with cold-started MHE solves (``--no-cold-check`` turns that
off) and stops when a `mhe.GaussNewtonStopping` test fires (``--iterations`` is the cap).
``--arrival-bounds`` bounds ``s_bar`` and ``sigma`` to the box of `mhe.arrival_bounds`
(vx and omega from the data, vy from ``--hidden-box``). At the end, J is evaluated at the
final parameters from the run's warm starts, from one cold start (unmeasured states at
``s_bar``) and from ``--report-starts`` cold starts per window (lowest MHE cost kept).

    python benchmarks/mhe_vehicle_recovery.py --iterations 400 --crlb
    python benchmarks/mhe_vehicle_recovery.py --optimizer gauss_newton --arrival-bounds --iterations 150 --log-every 5

Writes results/mhe_vehicle_recovery/{recovery.json, recovery.png}.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from mhe import (IDENTIFIED, GaussNewtonStopping, MHESettings, MovingHorizonEstimator, PEMIdentifier,
                 SingleTrackVehicle, StateSpaceModel, WindowSolver, arrival_bounds, lower_cost, prediction_loss,
                 residual_jacobian)
from mhe.solver import cold_solve
from mhe.pem import OPTIMIZERS
from mhe.racing import MEASURED, RacingData, perturbed_values, relative_errors

ARRIVAL_MEAN = (1.5, 0.0, 0.0)
#: `mhe.arrival_bounds` keywords of ``--arrival-bounds`` by default: s_bar_vy in +-1 m/s, 10 % margin,
#: sigma within 0.05-10 times the box width.
ARRIVAL_BOUNDS = {"hidden": {1: (-1.0, 1.0)}, "margin": 0.1, "std_range": (0.05, 10.0)}


def make_estimator(values: dict[str, float], data: RacingData, identify=IDENTIFIED,
                   q_scale: tuple[float, ...] = (1.0, 1.0, 1.0),
                   arrival_std: tuple[float, ...] = (10.0, 10.0, 100.0), bounds: dict | None = None
                   ) -> MovingHorizonEstimator:
    """The MHE of the identification model; ``bounds``: keyword arguments of `mhe.arrival_bounds` (None: unbounded)."""
    model = StateSpaceModel(SingleTrackVehicle(values, identify=identify), dt=0.02, measured=MEASURED)
    q = tuple(f * v for f, v in zip(q_scale, data.process_std))
    box = (None, None) if bounds is None else arrival_bounds(data.windows(), model, **bounds)
    return MovingHorizonEstimator(model, MHESettings(data.horizon, q, data.measurement_std), ARRIVAL_MEAN, arrival_std,
                                  *box)


def crlb(data: RacingData, windows, build: Path) -> dict[str, float]:
    """Cramer-Rao std of the relative errors of all 17 tyre/drivetrain/inertia parameters at the truth."""
    names = IDENTIFIED + ("Er",)
    est = make_estimator(perturbed_values(0.0, identify=()), data, identify=names)
    sol = WindowSolver(est, build).solve(windows)
    rj = residual_jacobian(est, sol.point.stages(), windows)
    bp = est.model.physics.params
    free = bp.free_names
    dp = torch.func.jacfwd(lambda r: torch.stack([bp.bounds[n].from_raw(r[i]) for i, n in enumerate(free)]))(
        bp.raw.detach())
    scale = dp.diagonal() / torch.tensor([abs(float(bp()[n])) for n in free])
    order = [n for n, _ in est.named_parameters()]
    first = sum(p.numel() for _, p in list(est.named_parameters())[:order.index("model.physics.params.raw")])
    dr = rj.jacobian[..., first:first + len(free)] / scale
    fisher = torch.einsum("myp,myq,y->pq", dr, dr, 1.0 / rj.residual.var(0))
    std = torch.linalg.inv(fisher).diagonal().sqrt()
    return {n: float(s) for n, s in zip(free, std)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--lr", type=float, default=0.02, help="Adam learning rate, cosine-decayed to 1 %%")
    ap.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam",
                    help="outer optimizer (the method uses Adam; L-BFGS for comparison, lr = its first step; "
                         "gauss_newton: Levenberg-Marquardt on the residual Jacobian, lr unused)")
    ap.add_argument("--damping", type=float, default=1e-3,
                    help="gauss_newton: first Levenberg-Marquardt mu as a multiple of max diag(J^T J)")
    ap.add_argument("--no-cold-check", action="store_true",
                    help="gauss_newton: accept steps on warm-started J only (no cold-start verification)")
    stop = GaussNewtonStopping()
    ap.add_argument("--ftol", type=float, default=stop.ftol,
                    help="gauss_newton: stop when J fell by less than ftol*J over --patience accepted steps (0: off)")
    ap.add_argument("--patience", type=int, default=stop.patience)
    ap.add_argument("--xtol", type=float, default=stop.xtol, help="gauss_newton: stop on an accepted step below this")
    ap.add_argument("--max-damping", type=float, default=stop.max_damping,
                    help="gauss_newton: stop when mu > max_damping * max diag(J^T J) (0: off)")
    ap.add_argument("--verify-starts", type=int, default=1,
                    help="gauss_newton: cold starts per window of the final check before stopping (0: none; "
                         ">1 needs --arrival-bounds)")
    ap.add_argument("--report-starts", type=int, default=5,
                    help="cold starts per window of the final report (>1 only with --arrival-bounds)")
    ap.add_argument("--arrival-bounds", action="store_true",
                    help="bound s_bar to the data's range of vx, omega and --hidden-box for vy, sigma to "
                         "--arrival-std-range times that width (mhe.arrival_bounds)")
    ap.add_argument("--hidden-box", type=float, nargs=2, default=ARRIVAL_BOUNDS["hidden"][1],
                    help="box of s_bar_vy in m/s")
    ap.add_argument("--arrival-margin", type=float, default=ARRIVAL_BOUNDS["margin"])
    ap.add_argument("--arrival-std-range", type=float, nargs=2, default=ARRIVAL_BOUNDS["std_range"])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--factor", type=float, default=0.5, help="relative offset of the start values")
    ap.add_argument("--seed", type=int, default=0, help="seed of the signs of the start offsets")
    ap.add_argument("--spread", type=float, default=0.0, help="offsets drawn from factor +- spread")
    ap.add_argument("--steps", type=int, default=2000, help="samples of the recording")
    ap.add_argument("--horizon", type=int, default=10, help="MHE horizon N")
    ap.add_argument("--q-scale", type=float, nargs=3, default=(1.0, 1.0, 1.0),
                    help="MHE process-noise std Q^(1/2) per state as multiples of the simulator's (a tuning choice)")
    ap.add_argument("--arrival-std", type=float, nargs=3, default=(10.0, 10.0, 100.0),
                    help="start of the arrival-cost std sigma (weak: the windows' data determine x_0)")
    ap.add_argument("--log-every", type=int, default=20, help="iterations between progress lines")
    ap.add_argument("--crlb", action="store_true", help="also compute Cramer-Rao std at the truth")
    ap.add_argument("--out", type=Path, default=Path("results/mhe_vehicle_recovery"))
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    build = Path("build/l4casadi/mhe_vehicle_recovery")
    data = RacingData(steps=args.steps, horizon=args.horizon)
    windows = data.windows()
    init = perturbed_values(args.factor, args.seed, fixed={"Er": 0.0}, spread=args.spread)
    bounds = {"hidden": {1: tuple(args.hidden_box)}, "margin": args.arrival_margin,
              "std_range": tuple(args.arrival_std_range)} if args.arrival_bounds else None
    est = make_estimator(init, data, q_scale=tuple(args.q_scale), arrival_std=tuple(args.arrival_std), bounds=bounds)
    start_err = relative_errors(init)
    print(f"{len(windows)} windows of N={data.horizon}; start mean relative error "
          f"{sum(start_err.values()) / len(start_err):.3f}", flush=True)
    history = []
    t0 = time.perf_counter()
    with WindowSolver(est, build, workers=args.workers) as solver:
        pem = PEMIdentifier(est, windows, solver, lr=args.lr, optimizer_name=args.optimizer, damping=args.damping,
                            cold_check=not args.no_cold_check, verify_starts=args.verify_starts,
                            stopping=GaussNewtonStopping(args.ftol, args.patience, args.xtol, args.max_damping))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(pem.optimizer, args.iterations, eta_min=args.lr * 0.01) \
            if args.optimizer == "adam" else None

        def log(i, step):
            if sched is not None:
                sched.step()
            errs = relative_errors({n: float(v.detach()) for n, v in est.model.physics.params().items()})
            mean = sum(errs.values()) / len(errs)
            history.append({"iteration": i, "J": step.loss, "mean_rel_error": mean, "rel_errors": errs,
                            "n_failed": step.n_failed, "evaluations": step.evaluations, "applied": step.applied,
                            "solve_s": step.solve_s, "hypergradient_s": step.hypergradient_s,
                            "ipopt_iterations": step.iterations, "lm_mu": pem.lm.mu,
                            "lm_mu_relative": None if pem.lm.scale is None else pem.lm.mu / pem.lm.scale,
                            "switched": step.switched, "check_rejected": step.check_rejected, "stop": step.stop,
                            "arrival_mean": est.arrival_mean.detach().tolist(),
                            "arrival_std": est.arrival_std().detach().tolist(), "wall_s": time.perf_counter() - t0})
            if i % args.log_every == 0 or i == args.iterations - 1 or step.stop:
                mu = f"mu={pem.lm.mu:.2e} " if args.optimizer == "gauss_newton" else ""
                print(f"{i:4d} J={step.loss:.4e} mean rel err={mean:.4f} failed={step.n_failed} "
                      f"evals={step.evaluations} switched={step.switched} check_rejected={step.check_rejected} "
                      f"solve={step.solve_s:.2f}s hypergrad={step.hypergradient_s:.2f}s "
                      f"{mu}t={time.perf_counter() - t0:.0f}s{' stop: ' + step.stop if step.stop else ''}", flush=True)
            if i % (5 * args.log_every) == 0 or step.stop:
                print("      ", {k: round(v, 3) for k, v in errs.items()}, flush=True)
                print("       s_bar", est.arrival_mean.detach().numpy().round(3), "sigma",
                      est.arrival_std().detach().numpy().round(4), flush=True)

        pem.fit(args.iterations, log)
        wall = time.perf_counter() - t0
        last, cold = solver.solve(windows, pem.starts), solver.solve(windows)
        starts = args.report_starts if args.arrival_bounds else 1
        multi = cold_solve(solver, windows, starts)[0] if starts > 1 else cold
        both, took = lower_cost(est, windows, last, multi)
        final_j, cold_j, multi_j, both_j = (float(prediction_loss(est, s.point[s.ok].stages(), windows[s.ok])[0].sum())
                                            for s in (last, cold, multi, both))
        per_window = [prediction_loss(est, s.point.stages(), windows)[0] for s in (last, cold, multi)]

        def differ(a, b):
            return int(((a - b).abs() > 1e-8 * a.abs().clamp_min(1e-12)).sum())
    final = {n: float(v.detach()) for n, v in est.model.physics.params().items()}
    errs = relative_errors(final)
    out = {"config": {**vars(args), "out": str(args.out), "data": data.__dict__, "identified": list(IDENTIFIED),
                      "fixed": {"Er": 0.0, "m": final["m"], "lf": final["lf"], "lr": final["lr"]},
                      "n_windows": len(windows)},
           "start_values": {n: init[n] for n in IDENTIFIED}, "final_values": {n: final[n] for n in IDENTIFIED},
           "start_rel_errors": start_err, "final_rel_errors": errs,
           "final_mean_rel_error": sum(errs.values()) / len(errs), "final_J": final_j, "final_n_failed": last.n_failed,
           "final_J_cold_start": cold_j, "final_n_failed_cold_start": cold.n_failed,
           "final_J_cold_multistart": multi_j, "report_starts": starts, "final_n_failed_multistart": multi.n_failed,
           "final_J_lower_cost": both_j, "final_windows_cold_lower_cost": int(took.sum()),
           "final_windows_J_differ_warm_cold": differ(per_window[0], per_window[1]),
           "final_windows_J_differ_warm_multistart": differ(per_window[0], per_window[2]),
           "final_arrival_mean": est.arrival_mean.detach().tolist(),
           "final_arrival_std": est.arrival_std().detach().tolist(),
           "arrival_mean_bounds": [[b.lower, b.upper] for b in est.arrival_mean_bounds],
           "arrival_std_bounds": [[b.lower, b.upper] for b in est.arrival_std_bounds],
           "iterations": len(history), "stop_reason": pem.stop_reason,
           "evaluations": sum(h["evaluations"] for h in history),
           "wall_s": wall, "skipped_steps": pem.skipped,
           "first_at_most_10pct": next(({k: h[k] for k in ("iteration", "mean_rel_error", "J", "wall_s")}
                                        for h in history if h["mean_rel_error"] <= 0.1), None),
           "history": history}
    if args.crlb:
        out["crlb_rel_std_at_truth"] = crlb(data, windows, build)
    (args.out / "recovery.json").write_text(json.dumps(out, indent=1) + "\n")
    keys = ("final_mean_rel_error", "final_J", "final_J_cold_start", "final_J_cold_multistart", "final_J_lower_cost",
            "final_windows_J_differ_warm_cold", "final_windows_J_differ_warm_multistart",
            "final_windows_cold_lower_cost", "final_arrival_mean", "final_arrival_std", "iterations", "stop_reason",
            "evaluations", "wall_s", "first_at_most_10pct", "final_rel_errors")
    print(json.dumps({k: out[k] for k in keys}, indent=1))
    if "crlb_rel_std_at_truth" in out:
        print("CRLB relative std at truth:", {k: round(v, 4) for k, v in out["crlb_rel_std_at_truth"].items()})
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    it = [h["iteration"] for h in history]
    ax[0].semilogy(it, [h["J"] for h in history])
    ax[0].set(xlabel="PEM iteration", ylabel="J (Eq. 9)")
    ax[1].semilogy(it, [h["mean_rel_error"] for h in history])
    ax[1].axhline(0.1, color="k", ls="--", lw=0.8)
    ax[1].set(xlabel="PEM iteration", ylabel="mean relative parameter error")
    fig.tight_layout()
    fig.savefig(args.out / "recovery.png", dpi=120)
    assert math.isfinite(out["final_mean_rel_error"])


if __name__ == "__main__":
    main()
