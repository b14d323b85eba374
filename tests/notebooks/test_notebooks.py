"""Every notebook in notebooks/ runs end to end on short settings and computes sane numbers.

Each notebook is executed with nbclient in a temporary working directory (its run outputs
land there, not in the repository), with ``TORCH_UDE_NOTEBOOK_SHORT=1`` and an empty results
folder, on the kernel of the interpreter running the tests. Each notebook ends by printing
one ``RESULT {json}`` line, which the checks below read.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHECKED = {"jet_matching_quickstart.ipynb", "savgol_and_noise.ipynb", "baseline_vs_jet.ipynb",
           "on_device_training.ipynb", "jet_vs_pem.ipynb", "real_logs.ipynb", "racing_tables.ipynb"}
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
_KERNEL_PROBE = "import sys\nprint('KERNEL_PREFIX ' + sys.prefix)"


def _stream_text(nb) -> str:
    return "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream" and out.get("name") == "stdout")


def run_notebook(name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Execute ``notebooks/name`` in ``workdir`` on short settings; return its RESULT dict."""
    monkeypatch.setenv("TORCH_UDE_NOTEBOOK_SHORT", "1")
    monkeypatch.setenv("TORCH_UDE_RESULTS", str(workdir / "results"))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert not any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), \
        f"{name} is stored with outputs; clear them before committing."
    nb.cells.insert(0, nbformat.v4.new_code_cell(_KERNEL_PROBE))
    # "python3" is ipykernel's own spec; jupyter_client starts it with sys.executable. The timeout per cell
    # catches a hang: real_logs' tiny runs of three benchmarks and PEM-MHE take one cell about 5 min on a
    # loaded 2-core machine
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=900,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()
    text = _stream_text(nb)
    prefixes = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("KERNEL_PREFIX ")]
    assert prefixes == [sys.prefix], f"the notebook ran on {prefixes}, not on this interpreter ({sys.prefix})"
    results = [line.removeprefix("RESULT ") for line in text.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 1, f"{name} must print exactly one RESULT line; got {len(results)}"
    return json.loads(results[0])


def test_every_notebook_is_checked():
    found = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    assert found == CHECKED, f"notebooks {sorted(found ^ CHECKED)}: give each notebook a test below and list it in CHECKED."


def test_quickstart_learns_the_damping(tmp_path, monkeypatch):
    r = run_notebook("jet_matching_quickstart.ipynb", tmp_path, monkeypatch)
    assert r["short"] is True and r["updates"] == 2000
    # f_known alone: e_field_visited 0.128; the short run reaches about 0.005
    assert r["e_field_visited_known"] > 0.1
    assert r["e_field_visited"] < 0.02 and r["e_field"] < 0.03
    assert abs(r["c_hat"] - 0.40) < 0.02
    assert r["m"] == r["m_calibrate"] and 25 <= r["m"] <= 45 and r["lambda2"] == 0.0
    # 8 s rollouts: about 0.009 against 1.2 for f_known alone
    assert r["rollout_error"] < 0.05 and r["rollout_error_known"] > 0.5
    assert (tmp_path / "runs" / "notebook_quickstart" / "field.pt").is_file()


def test_savgol_and_noise_estimators(tmp_path, monkeypatch):
    r = run_notebook("savgol_and_noise.ipynb", tmp_path, monkeypatch)
    assert r["rows_vs_scipy"] < 1e-12
    assert 0.95 < r["sigma_ratio_min"] and r["sigma_ratio_max"] < 1.05
    m = [min(ms) for ms in r["m"]]
    assert m == sorted(m) and m[0] < m[-1]  # Eq. (24): m grows with the noise
    gate = dict(zip(r["levels"], r["lambda2"]))
    assert gate[0.001] == [0.1] and gate[0.01] == [0.0]  # Eq. (26) at tau_SNR = 12
    assert all(a > b for a, b in zip(r["snr2"], r["snr2"][1:]))
    # at the chosen m the polynomial bias of xdot is a small fraction of the per-window noise
    for level, bias in r["bias1_at_m"].items():
        assert bias < 0.2 * r["noise1_at_m"][level]


def test_baseline_vs_jet_runs_a_matched_pair(tmp_path, monkeypatch):
    r = run_notebook("baseline_vs_jet.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "notebook (short settings)" and r["trainers"] == ["jet_v2", "baseline_K40"]
    jet, base = r["e_field_visited"]["jet_v2"][0], r["e_field_visited"]["baseline_K40"][0]
    assert jet < 0.02 and base < 0.06  # f_known alone: 0.128
    assert r["ratio_e_field_visited"]["baseline_K40"][0] == pytest.approx(jet / base)


def _benchmark_payload() -> dict:
    """A made-up result in the layout `benchmarks/baseline/comparison.py` writes."""
    def stat(mean: float) -> dict:
        return {"mean": mean, "std": 0.1 * mean, "min": 0.9 * mean, "max": 1.1 * mean, "n": 3}

    summary = {}
    for level, jet, k40, k80 in ((0.0, 0.0004, 0.0010, 0.0008), (0.01, 0.0022, 0.0028, 0.0025)):
        row = {"jet_v2": {k: stat(v) for k, v in (("e_field", 2 * jet), ("e_field_visited", jet), ("c_hat", 0.4),
                                                  ("wall_s", 30.0))}}
        for name, base in (("baseline_K40", k40), ("baseline_K80", k80)):
            row[name] = {k: stat(v) for k, v in (("e_field", 2 * base), ("e_field_visited", base), ("c_hat", 0.41),
                                                 ("wall_s", 300.0))} | {"tape_bytes": 5_652_480}
            for key in ("e_field", "e_field_visited"):
                row[f"ratio_{key}_jet_v2_vs_{name}"] = row["jet_v2"][key]["mean"] / row[name][key]["mean"]
        summary[str(level)] = row
    return {"seeds": [0, 1, 2], "levels": [0.0, 0.01], "summary": summary,
            "geometric_mean": {"ratio_e_field_visited_jet_v2_vs_baseline_K40": 0.5}}


def test_baseline_vs_jet_reads_the_benchmark_json(tmp_path, monkeypatch):
    path = tmp_path / "results" / "baseline_comparison" / "baseline_comparison.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_benchmark_payload()))
    r = run_notebook("baseline_vs_jet.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "benchmark" and r["levels"] == [0.0, 0.01]
    assert r["trainers"] == ["jet_v2", "baseline_K40", "baseline_K80"]
    assert r["ratio_e_field_visited"]["baseline_K40"] == pytest.approx([0.4, 0.0022 / 0.0028])
    assert r["geometric_mean"] == {"ratio_e_field_visited_jet_v2_vs_baseline_K40": 0.5}
    assert not (tmp_path / "runs").exists()  # nothing was trained


def test_on_device_training_runs_the_c_trainer_here(tmp_path, monkeypatch):
    r = run_notebook("on_device_training.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "notebook (short settings)" and r["updates"] == 600
    assert r["e_field_visited"] < 0.06 and r["e_field_visited"] > 0  # f_known alone: 0.128
    assert abs(r["c_hat"] - 0.40) < abs(r["first_c_hat"] - 0.40) or abs(r["c_hat"] - 0.40) < 0.05
    assert 512 * 3 * 2 * 4 < r["static_bytes"] < 60_000


def test_on_device_training_reads_the_benchmark_json(tmp_path, monkeypatch):
    path = tmp_path / "results" / "c_device" / "c_device.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "sizes": {"trainer": 61288, "data": 2780, "bss": 65632, "text": 72124},
        "replay": [{"seed": s, "e_field_visited": 0.002 + 0.0001 * s, "c_hat": 0.396} for s in range(3)],
        "instructions": {"instructions_per_update": 480000,
                         "projected_ms_per_update": {"1.0": 2.0, "1.5": 3.0, "2.0": 4.0}},
        "adaptation": {"c_hat_over_time": [[10.0, 0.40], [80.0, 0.55]]}}))
    r = run_notebook("on_device_training.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "benchmark" and r["seeds"] == [0, 1, 2]
    assert r["e_field_visited"] == pytest.approx([0.002, 0.0021, 0.0022]) and r["static_bytes"] == 61288


def test_jet_vs_pem_runs_both_methods_and_loads_the_field_into_casadi(tmp_path, monkeypatch):
    r = run_notebook("jet_vs_pem.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "notebook (short settings)" and r["methods"] == ["jet", "pem_theta", "pem_theta_omega"]
    jet, pem_theta, pem_both = (r["e_field_visited"][m][0] for m in r["methods"])
    assert 0 < jet < 0.02 and 0 < pem_theta < 0.02 and 0 < pem_both < 0.02  # f_known alone: 0.128
    assert abs(r["c_hat"]["pem_theta"][0] - 0.40) < 0.03 and abs(r["c_hat"]["pem_theta_omega"][0] - 0.40) < 0.03
    assert r["best"]["0.01"] in r["methods"]
    assert r["casadi_max_difference"] < 1e-10


def test_jet_vs_pem_reads_the_benchmark_json(tmp_path, monkeypatch):
    def row(e, c):
        return {k: {"mean": v, "std": 0.1 * v, "min": v, "max": v, "n": 3}
                for k, v in (("e_field_visited", e), ("e_field", 2 * e), ("c_hat", c), ("wall_s", 10.0))}

    path = tmp_path / "results" / "jet_vs_pem" / "jet_vs_pem.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"summary": {
        "case_a@0.0": {"variants": {"jet": row(0.001, 0.40), "pem_theta": row(0.0001, 0.40)}, "ratios": {}},
        "case_a@0.01": {"variants": {"jet": row(0.002, 0.40), "pem_theta": row(0.003, 0.41)},
                        "ratios": {"pem_warm_time_to_cold_J_over_cold_time": [0.3]}}}}))
    r = run_notebook("jet_vs_pem.ipynb", tmp_path, monkeypatch)
    assert r["source"] == "benchmark" and r["levels"] == [0.0, 0.01]
    assert r["best"] == {"0.0": "pem_theta", "0.01": "jet"}
    assert r["casadi_max_difference"] is None and not (tmp_path / "runs").exists()


@pytest.mark.skipif(not all((SHARED_DATA / d).is_dir() for d in ("dfki_pendulum", "dfki_double_pendulum", "emps")),
                    reason=f"the DFKI and EMPS logs are not at {SHARED_DATA} (see ../shared/data/README.md)")
def test_real_logs_runs_every_method_on_the_dfki_logs(tmp_path, monkeypatch):
    r = run_notebook("real_logs.ipynb", tmp_path, monkeypatch)
    assert r["short"] is True and r["sources"] == {"dfki_pendulum": "tiny", "dfki_double_pendulum": "tiny",
                                                   "emps": "tiny", "dfki_pem": "tiny"}
    nrmse = r["nrmse_1s"]
    # the deterministic references: the lab's fits predict better than the known models alone
    # (single pendulum 2.95 against 5.20; double pendulum 0.058 against 0.96)
    assert nrmse["dfki_pendulum / lab_model"] < 0.7 * nrmse["dfki_pendulum / f_known_alone"]
    assert nrmse["dfki_double_pendulum / lab_model"] < 0.1 * nrmse["dfki_double_pendulum / f_known_alone"]
    # EMPS: the IDIM-LS fit predicts the validation record far better than M q'' = gtau vir alone
    assert nrmse["emps / idim_ls_model"] < 0.1 * nrmse["emps / f_known_alone"]
    for key in ("dfki_pendulum / jet_matching", "dfki_double_pendulum / rk4_baseline", "emps / jet_matching",
                "dfki_pendulum / PEM-MHE theta_all"):
        assert 0 < nrmse[key] < 100
    # torch-ude score of the seed-0 run on its validation file gives the benchmark's number
    assert r["scored"]["score_1s"] == pytest.approx(r["scored"]["benchmark_1s"], rel=1e-6)
    assert r["rollout"] == {"segments": 1, "files": ["ddp.csv"]}


RACING_JSONS = ["mhe_bayesrace/table1.json", "mhe_bayesrace_baselines/ekf_pem.json",
                "mhe_bayesrace_baselines/joint_mhe.json", "mhe_iac/baselines.json", "mhe_iac/deep_dynamics.json",
                "mhe_iac/table2.json", "mhe_subnet/subnet.json"]


def test_racing_tables_without_results_names_the_commands_and_shows_the_paper(tmp_path, monkeypatch):
    r = run_notebook("racing_tables.ipynb", tmp_path, monkeypatch)
    assert r["missing"] == RACING_JSONS and r["plots"] == []
    assert len(r["table1"]) == 5 and all(m.endswith(", paper") for m in r["table1"])
    assert r["table2_validation"]["PEM-MHE (gray-box), paper"] == 2.84e-4 and len(r["table2"]) == 6
    assert r["table2_blocked_validation"] == {}


def _write(root: Path, name: str, payload: dict) -> None:
    path = root / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_racing_tables_reads_every_row_of_the_benchmark_jsons(tmp_path, monkeypatch):
    def one(train, val, **extra):
        return {"train": {"mse": train}, "validation": {"mse": val, **extra}}

    ms = {"multi_step": {"mse": 0.1, "rmse_end": [0.8, 0.01]}}
    _write(tmp_path, "mhe_bayesrace/table1.json", {"truth": one(1e-10, 3e-5),
                                                   "pem_mhe": {**one(1e-19, 1e-3), "mean_rel_error": 4e-7,
                                                               "training_s": 100.0}})
    _write(tmp_path, "mhe_bayesrace_baselines/ekf_pem.json", {
        k: {**one(1e-5, 2e-5), "mean_rel_error": 0.1, "training_s": 2.0} for k in ("ekf_pem_paper", "ekf_pem_start")})
    _write(tmp_path, "mhe_bayesrace_baselines/joint_mhe.json",
           {"joint_mhe": {**one(4e-4, 2e-2), "mean_rel_error": 0.6, "training_s": 49.0}})
    _write(tmp_path, "mhe_subnet/subnet.json", {"rows": {"train": {"one_step": {"mse": 0.01}},
                                                         "validation": {"one_step": {"mse": 3.5}}},
                                                "training": {"seconds": 290.0}})
    _write(tmp_path, "mhe_iac/table2.json", {"one_step_error": "r^2", "rows": {
        "start": one(7e-4, 2e-3, **ms), "PEM-MHE (gray-box)": {**one(5e-4, 1.2e-3, **ms), "training_s": 1800.0}}})
    _write(tmp_path, "mhe_iac/baselines.json", {"rows": {"Joint-MHE": one(7.7e-4, 2.0e-3, **ms),
                                                          "SUBNET": one(3e-4, 4e-3, **ms)}})
    _write(tmp_path, "mhe_iac/deep_dynamics.json", {"rows": {"EKF->PEM (adaptive)": one(2e-4, 1.9e-3, **ms)}})
    _write(tmp_path, "mhe_iac/another.json", {"rows": {"new row": one(1e-4, 1e-3)}})  # a row added later
    _write(tmp_path, "mhe_iac/metrics.json", {"steps": 3})  # a run file, not a table
    _write(tmp_path, "mhe_iac_blocked/table2.json", {"rows": {"PEM-MHE (gray-box)": one(5e-4, 6e-4, **ms)}})
    _write(tmp_path, "mhe_iac_blocked_seed1/table2.json", {"rows": {"PEM-MHE (gray-box)": one(5e-4, 7e-4)}})
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.plot([0, 1])
    plt.savefig(tmp_path / "results" / "mhe_iac" / "validation.png")
    plt.close()
    r = run_notebook("racing_tables.ipynb", tmp_path, monkeypatch)
    assert r["missing"] == [] and r["plots"] == ["mhe_iac/validation.png"]
    assert r["table1"][5:] == ["ground truth, ours", "PEM-MHE (physics-only), ours",
                               "EKF->PEM, ours (10 inits within 5 % of the truth)",
                               "EKF->PEM, ours (from the 67.95 % start)", "Joint-MHE, ours", "SUBNET, ours"]
    assert r["table2"][6:] == ["start, ours [table2.json]", "PEM-MHE (gray-box), ours [table2.json]",
                               "Joint-MHE, ours [baselines.json]", "SUBNET, ours [baselines.json]",
                               "EKF->PEM (adaptive), ours [deep_dynamics.json]", "new row, ours [another.json]"]
    assert r["table2_validation"]["PEM-MHE (gray-box), ours [table2.json]"] == 1.2e-3
    assert r["table2_blocked_validation"] == {"PEM-MHE (gray-box), ours [mhe_iac_blocked/table2.json]": 6e-4,
                                              "PEM-MHE (gray-box), ours [mhe_iac_blocked_seed1/table2.json]": 7e-4}
