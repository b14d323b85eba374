"""What the input hold costs on the linear oscillator at 9 samples per period (benchmarks.mhe.oscillator_hold)."""
import json

import pytest

from benchmarks.mhe.oscillator_hold import main


def test_a_short_run_scores_every_hold_and_the_first_order_hold_beats_the_zero_order_hold(tmp_path):
    report = main(["--seeds", "0", "--steps", "400", "--max-steps", "3", "--out", str(tmp_path / "out"),
                   "--build", str(tmp_path / "build")])
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == report
    rows = {r["hold"]: r for r in report["rows"]}
    assert sorted(rows) == ["foh", "midpoint", "zoh"]
    noise = rows["foh"]["noise_rmse"]
    assert 0.008 < noise < 0.012  # the noise's own RMSE, std 0.01 over 400 samples
    for row in rows.values():  # the refinement starts at the PEM model: it never ends worse
        assert row["refined"]["free_run_rmse"] <= row["pem_mhe"]["free_run_rmse"] + 1e-12
    # the analogue input moves within each sample: holding it costs, interpolating it does not
    assert rows["foh"]["refined"]["free_run_rmse_clean"] < 0.5 * rows["zoh"]["refined"]["free_run_rmse_clean"]
    assert rows["foh"]["refined"]["free_run_rmse"] <= 1.1 * rows["foh"]["noise_std"]
    assert report["foh_within_10_percent_of_noise_std"] == [rows["foh"]["pem_mhe"]["free_run_rmse"] <= 0.011]


@pytest.mark.parametrize("bad, message", [(["--steps", "50"], r"--steps must be >= 100 .*; got 50\."),
                                          (["--noise", "0"], r"--noise must be > 0; got 0\.0\."),
                                          (["--max-hz", "-1"], r"--max-hz must be > 0; got -1\.0\."),
                                          (["--max-steps", "0"], r"--max-steps must be >= 1; got 0\.")])
def test_bad_settings_are_one_line_errors_naming_them(bad, message):
    with pytest.raises(ValueError, match=message):
        main(bad)
