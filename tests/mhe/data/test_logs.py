"""Readers of logged data: BayesRace .npz, the IAC .csv and any CSV; every bad input is an error or is counted."""
import numpy as np
import pytest
import torch

from mhe import ArrivalCost, IdentificationProblem, MHESettings, SingleTrackVehicle, make_windows
from mhe.data.logs import IAC_BRAKE_KPA, BayesRaceRecording, CSVRecording, IACRecording
from mhe.models.vehicle import BAYESRACE_TRUTH
from tests.mhe.datasets import bayesrace_file, data_file

HEADER = "t,steer,pedal,vx,omega"


def write_csv(path, rows, header=HEADER):
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return str(path)


def good_rows(n=30, dt=0.04):
    return [[round(0.5 + k * dt, 6), 0.01 * k, 0.5, 10.0 + 0.1 * k, 0.02 * k] for k in range(n)]


def reader(path, **kw):
    return CSVRecording(path, "t", ["steer", "pedal"], ["vx", "omega"], **kw)


def test_csv_reader_reads_named_columns(tmp_path):
    rows = good_rows()
    src = reader(write_csv(tmp_path / "log.csv", rows), dt=0.04)
    rec = src.record()
    assert rec.dt == 0.04 and rec.breaks == () and rec.states.shape == (30, 0)
    assert torch.equal(rec.inputs, torch.tensor([r[1:3] for r in rows], dtype=torch.float64))
    assert torch.equal(rec.outputs, torch.tensor([r[3:] for r in rows], dtype=torch.float64))
    assert src.load_report == {"rows": 30, "dropped_nan": 0, "kept": 30, "gaps": 0, "dt": 0.04}


def test_missing_columns_are_named(tmp_path):
    path = write_csv(tmp_path / "log.csv", good_rows(), header="t,steer,throttle,vx,omega")
    with pytest.raises(ValueError, match=r"has no column\(s\) \['pedal'\]; its columns are \['omega', 'steer', 't', "
                                         r"'throttle', 'vx'\]"):
        reader(path).record()


def test_non_monotonic_time_is_an_error(tmp_path):
    rows = good_rows()
    rows[12][0], rows[13][0] = rows[13][0], rows[12][0]
    with pytest.raises(ValueError, match="must increase strictly; it does not from row 12 to 13"):
        reader(write_csv(tmp_path / "log.csv", rows)).record()


def test_nan_rows_are_dropped_counted_and_never_spanned_by_a_window(tmp_path):
    rows = good_rows(40)
    rows[15][4] = "nan"
    rows[16][1] = ""
    src = reader(write_csv(tmp_path / "log.csv", rows), dt=0.04)
    rec = src.record()
    assert src.load_report["dropped_nan"] == 2 and src.load_report["kept"] == 38 and rec.breaks == (15,)
    assert rec.outputs.shape == (38, 2) and bool(torch.isfinite(rec.outputs).all())
    windows = make_windows(rec.inputs, rec.outputs, 5, 1, rec.breaks)
    # starts 0..9 end before row 15 of the kept rows; 15..32 start at or after it
    assert windows.start.tolist() == list(range(0, 10)) + list(range(15, 33))
    with pytest.raises(ValueError, match="No stretch between the breaks"):
        make_windows(rec.inputs[:20], rec.outputs[:20], 16, 1, rec.breaks)


def test_wrong_and_irregular_sample_time_are_errors(tmp_path):
    path = write_csv(tmp_path / "log.csv", good_rows())
    with pytest.raises(ValueError, match=r"sample time of .* is 0.04 s \(median step\), not the given dt = 0.02 s"):
        reader(path, dt=0.02).record()
    rows = good_rows()
    rows[10][0] = round(rows[10][0] + 0.015, 6)
    with pytest.raises(ValueError, match="steps that are neither dt = 0.04 s nor a gap"):
        reader(write_csv(tmp_path / "odd.csv", rows), dt=0.04).record()


def test_too_few_samples_is_an_error(tmp_path):
    rows = good_rows(5)
    rows[2][3] = "nan"
    with pytest.raises(ValueError, match=r"has 4 usable rows \(1 of 5 dropped for NaN/Inf\); at least 10 are needed"):
        reader(write_csv(tmp_path / "log.csv", rows), min_samples=10).record()
    with pytest.raises(ValueError, match="No file at"):
        reader(str(tmp_path / "absent.csv")).record()


def test_bayesrace_file_and_a_broken_copy(tmp_path):
    path = bayesrace_file("DYN-PP-ETHZ")
    src = BayesRaceRecording(str(path))
    rec = src.record()
    raw = np.load(path)
    assert rec.dt == 0.02 and rec.outputs.shape == (1001, 2) and src.truth == BAYESRACE_TRUTH
    np.testing.assert_array_equal(rec.inputs[:-1].numpy(), raw["inputs"][[1, 0]].T)  # (delta, gamma)
    np.testing.assert_array_equal(rec.outputs.numpy(), raw["dstates"][[3, 5]].T)
    np.testing.assert_array_equal(rec.states.numpy(), raw["dstates"][3:6].T)
    np.savez(tmp_path / "broken.npz", time=raw["time"], dstates=raw["dstates"])
    with pytest.raises(ValueError, match=r"has no column\(s\) \['inputs'\]"):
        BayesRaceRecording(str(tmp_path / "broken.npz")).record()
    problem = IdentificationProblem(src, MHESettings(10, (1e-3,) * 3, (1e-3,) * 2), ArrivalCost((1.0, 0.0, 0.0),
                                    (1.0, 0.3, 3.0)), (0, 2), SingleTrackVehicle(abs_vx=True), stride=10,
                                    discretization="euler")
    assert len(problem.windows) == 100 and problem.truth == BAYESRACE_TRUTH
    other = BayesRaceRecording(str(path), "states", 3, 0.02, 1e-3).with_path(tmp_path / "other.npz")
    assert (other.path, other.trajectory, other.first, other.dt, other.dt_rtol) == (
        str(tmp_path / "other.npz"), "states", 3, 0.02, 1e-3)


def test_iac_log_as_deep_dynamics_parses_it(tmp_path):
    path = data_file("iac/LVMS_23_01_04_B.csv")
    same, nxt = IACRecording(str(path), align="same"), IACRecording(str(path))
    rs, rn = same.record(), nxt.record()
    # the first stretch with |vx| >= 5 m/s: rows 667-10713 (401.9 s at 25 Hz)
    assert (same.load_report["first_row"], same.load_report["last_row"]) == (667, 10713)
    assert rs.outputs.shape == (10047, 2) and rn.outputs.shape == (10046, 2) and rs.dt == 0.04
    assert torch.equal(rn.inputs, rs.inputs[1:]) and torch.equal(rn.outputs, rs.outputs[:-1])
    assert bool((rs.outputs[:, 0] >= 5.0).all())
    raw = np.loadtxt(path, delimiter=",", skiprows=1)[667:10714]
    brake, throttle = raw[:, 16] > 0, raw[:, 15] / 100.0
    np.testing.assert_allclose(rs.inputs[:, 1].numpy(), np.where(brake, -raw[:, 16] / IAC_BRAKE_KPA, throttle))
    assert float(rs.inputs[:, 1].min()) < 0 < float(rs.inputs[:, 1].max()) <= 1.0
    lines = path.read_text().splitlines()
    cut = tmp_path / "no_brake.csv"
    cut.write_text("\n".join(",".join(line.split(",")[:16]) for line in lines[:2000]) + "\n")
    with pytest.raises(ValueError, match=r"has no column\(s\) \['brake_ped_cmd\(kPa\)'\]"):
        IACRecording(str(cut)).record()
    with pytest.raises(ValueError, match="align must be 'next'"):
        IACRecording(str(path), align="previous")


def test_iac_parts_split_the_stretch_in_time_without_overlap_or_gap():
    path = str(data_file("iac/LVMS_23_01_04_B.csv"))
    whole, train, val = (IACRecording(path, part=p) for p in ((0.0, 1.0), (0.0, 0.7), (0.7, 1.0)))
    rw, rt, rv = whole.record(), train.record(), val.record()
    assert len(rt.outputs) == int(0.7 * 10046) == 7032 and len(rt.outputs) + len(rv.outputs) == len(rw.outputs)
    for name in ("inputs", "outputs", "states"):
        assert torch.equal(torch.cat([getattr(rt, name), getattr(rv, name)]), getattr(rw, name))
    assert (train.load_report["first_row"], train.load_report["last_row"]) == (667, 667 + 7031)
    assert (val.load_report["first_row"], val.load_report["last_row"]) == (667 + 7032, 10712)
    same = IACRecording(path, align="same", part=(0.7, 1.0))
    assert torch.equal(same.record().inputs[1:], rv.inputs)  # same cut; "same" keeps one row more at the end


def test_iac_blocks_split_the_stretch_and_leave_gaps_no_window_spans():
    path = str(data_file("iac/LVMS_23_01_04_B.csv"))
    whole = IACRecording(path).record()
    train, val = IACRecording(path, part=(0.0, 0.2, 0.3, 0.5)), IACRecording(path, part=(0.2, 0.3, 0.5, 1.0))
    rt, rv = train.record(), val.record()
    assert len(rt.outputs) + len(rv.outputs) == len(whole.outputs) == 10046
    cut = [0, int(0.2 * 10046), int(0.3 * 10046), int(0.5 * 10046), 10046]
    assert train.load_report["blocks"] == [[667 + cut[0], 667 + cut[1] - 1], [667 + cut[2], 667 + cut[3] - 1]]
    assert rt.breaks == (cut[1],) and rv.breaks == (cut[2] - cut[1],)
    for name in ("inputs", "outputs", "states"):
        w = getattr(whole, name)
        assert torch.equal(getattr(rt, name), torch.cat([w[:cut[1]], w[cut[2]:cut[3]]]))
        assert torch.equal(getattr(rv, name), torch.cat([w[cut[1]:cut[2]], w[cut[3]:]]))
    assert rt.follows().sum() == len(rt.outputs) - 2 and not rt.follows()[cut[1] - 1]
    assert rt.stretches() == [(0, cut[1]), (cut[1], len(rt.outputs))]
    assert train.rest().part == val.part and val.rest().part == train.part
    assert IACRecording(path, part=(0.0, 0.7)).rest().part == (0.7, 1.0)
    assert IACRecording(path, part=(0.1, 0.7)).rest().part == (0.0, 0.1, 0.7, 1.0)
    with pytest.raises(ValueError, match="keeps the whole stretch"):
        IACRecording(path).rest()
    adjacent = IACRecording(path, part=(0.0, 0.2, 0.2, 0.5)).record()  # blocks that touch make no gap
    assert adjacent.breaks == () and torch.equal(adjacent.outputs, whole.outputs[:cut[3]])


@pytest.mark.parametrize("part", [(0.7, 0.7), (0.8, 0.2), (-0.1, 0.5), (0.5, 1.2), (0.5,), (0.1, 0.2, 0.3), (),
                                  (0.0, 0.3, 0.2, 0.5), (0.0, 0.2, 0.5, 0.4)])
def test_iac_part_outside_zero_to_one_is_an_error(part):
    with pytest.raises(ValueError, match=r"part must be fractions \(a, b\) of the gated stretch with 0 <= a < b"):
        IACRecording("unused.csv", part=part)
