"""Reading recorded logs: formats, jitter, gaps, rejected rows and every kind of bad input."""
import re

import numpy as np
import pytest
import scipy.io

from torch_ude.recorded import read_csv_table, read_log, write_csv_table
from tests.torch_ude.helpers import forced_pendulum_log, write_csv

COLS = dict(time="time", states=["position", "velocity"], inputs=["torque"])


@pytest.fixture(scope="module")
def log():
    return forced_pendulum_log(duration=3.0, fs=500.0, noise=0.0, jitter=0.1, seed=1)


def test_a_jittery_csv_is_resampled_onto_the_nominal_grid(tmp_path, log):
    write_csv(tmp_path / "a.csv", log)
    rec = read_log(tmp_path / "a.csv", fs=250.0, **COLS)
    assert rec.report.decimation == 2 and rec.report.segments == 1 and rec.report.rejected_nonfinite == 0
    (seg,) = rec.segments
    assert seg.shape[1] == 3 and rec.names == ("position", "velocity", "torque") and rec.n_inputs == 1
    grid = np.arange(seg.shape[0]) / 250.0
    # the torque is a known function of time: on the grid it is within the interpolation error
    ref = forced_pendulum_log(duration=3.0, fs=500.0, noise=0.0, jitter=0.0, seed=1)
    assert np.allclose(seg[:, 2], np.interp(grid, ref["time"], ref["torque"]), atol=2e-3)
    assert np.allclose(seg[:, 0], np.interp(grid, ref["time"], ref["position"]), atol=2e-3)


@pytest.mark.parametrize("fmt", ["npz", "mat"])
def test_npz_and_mat_give_the_csv_values(tmp_path, log, fmt):
    write_csv(tmp_path / "a.csv", log)
    path = tmp_path / f"a.{fmt}"
    if fmt == "npz":
        np.savez(path, **log)
    else:
        scipy.io.savemat(path, {k: v.reshape(-1, 1) for k, v in log.items()})
    a, b = read_log(tmp_path / "a.csv", fs=500.0, **COLS), read_log(path, fs=500.0, **COLS)
    assert np.allclose(a.segments[0], b.segments[0], rtol=0, atol=1e-15)


def test_a_long_gap_splits_the_log_and_a_short_one_is_bridged(tmp_path, log):
    keep = np.ones(log["time"].size, dtype=bool)
    keep[500:520] = False  # 40 ms: a gap
    keep[1000:1002] = False  # 4 ms: bridged
    write_csv(tmp_path / "gap.csv", {k: v[keep] for k, v in log.items()})
    rec = read_log(tmp_path / "gap.csv", fs=500.0, **COLS)
    assert (rec.report.segments, rec.report.gaps, rec.report.bridged) == (2, 1, 1)
    assert rec.starts[1] == pytest.approx(log["time"][520])
    assert read_log(tmp_path / "gap.csv", fs=500.0, max_gap=0.05, **COLS).report.segments == 1


def test_nan_and_inf_rows_are_rejected_and_counted(tmp_path, log):
    bad = {k: v.copy() for k, v in log.items()}
    bad["velocity"][10] = np.nan
    bad["torque"][11] = np.inf
    bad["time"][12] = np.nan
    write_csv(tmp_path / "nan.csv", bad)
    with pytest.warns(UserWarning, match=r"nan.csv: 3 of 1500 rows hold NaN or Inf .*first at data row 11"):
        rec = read_log(tmp_path / "nan.csv", fs=500.0, **COLS)
    assert rec.report.rejected_nonfinite == 3 and rec.report.first_rejected_row == 11
    assert np.isfinite(rec.segments[0]).all()


def test_a_missing_file_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"the log .*nowhere.csv does not exist"):
        read_log(tmp_path / "nowhere.csv", fs=500.0, **COLS)


def test_an_unknown_file_type_is_an_error(tmp_path):
    (tmp_path / "a.txt").write_text("time,position\n")
    with pytest.raises(ValueError, match=r"a.txt: unknown file type '.txt'; a log must be .csv, .npz or .mat"):
        read_log(tmp_path / "a.txt", fs=500.0, **COLS)


def test_a_mat_file_scipy_cannot_read_is_an_error_naming_it(tmp_path):
    header = b"MATLAB 7.3 MAT-file".ljust(116, b" ") + bytes(8) + b"\x00\x02IM" + bytes(400)
    (tmp_path / "v73.mat").write_bytes(header)
    with pytest.raises(ValueError, match=r"v73.mat: scipy.io.loadmat cannot read it \(it is MATLAB v7.3, an HDF5 file\); "
                                         r"save it as MATLAB v5"):
        read_log(tmp_path / "v73.mat", fs=500.0, **COLS)
    (tmp_path / "empty.mat").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.mat: scipy.io.loadmat cannot read it"):
        read_log(tmp_path / "empty.mat", fs=500.0, **COLS)


def test_a_missing_column_names_the_column_and_lists_the_header(tmp_path, log):
    write_csv(tmp_path / "a.csv", {k: v for k, v in log.items() if k != "torque"})
    with pytest.raises(ValueError, match=r"a.csv: column\(s\) \['torque'\] .* it has \['time', 'position', 'velocity'\]"):
        read_log(tmp_path / "a.csv", fs=500.0, **COLS)
    np.savez(tmp_path / "a.npz", **{k: v for k, v in log.items() if k != "position"})
    with pytest.raises(ValueError, match=r"a.npz: variable\(s\) \['position'\]"):
        read_log(tmp_path / "a.npz", fs=500.0, **COLS)


def test_a_column_named_twice_is_an_error(tmp_path, log):
    write_csv(tmp_path / "a.csv", log)
    with pytest.raises(ValueError, match="must be distinct"):
        read_log(tmp_path / "a.csv", time="time", states=["position", "position"], inputs=["torque"], fs=500.0)


def test_inputs_of_the_wrong_length_name_the_variable(tmp_path, log):
    short = dict(log, torque=log["torque"][:-7])
    np.savez(tmp_path / "a.npz", **short)
    with pytest.raises(ValueError, match=r"a.npz: variable 'torque' has 1493 samples but the time variable 'time' "
                                         r"has 1500"):
        read_log(tmp_path / "a.npz", fs=500.0, **COLS)


def test_a_ragged_csv_row_names_the_line(tmp_path, log):
    write_csv(tmp_path / "a.csv", log)
    lines = (tmp_path / "a.csv").read_text().splitlines()
    lines[5] = ",".join(lines[5].split(",")[:3])
    (tmp_path / "a.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"a.csv: line 6 has 3 fields but the header names 4 columns"):
        read_log(tmp_path / "a.csv", fs=500.0, **COLS)


def test_time_that_does_not_increase_names_the_row(tmp_path, log):
    back = dict(log, time=log["time"].copy())
    back["time"][100] = back["time"][98]
    write_csv(tmp_path / "a.csv", back)
    with pytest.raises(ValueError, match=r"a.csv: the time column 'time' does not increase at data row 101"):
        read_log(tmp_path / "a.csv", fs=500.0, **COLS)


@pytest.mark.parametrize("fs", [300.0, 333.0, 1000.0])
def test_a_rate_that_disagrees_with_the_time_stamps_is_an_error(tmp_path, log, fs):
    write_csv(tmp_path / "a.csv", log)
    with pytest.raises(ValueError, match=rf"a.csv: the time stamps have a median step of 0.002\d* s \(49\d\.?\d* Hz\), which is "
                                         rf"not the nominal rate data.fs = {fs:g} Hz"):
        read_log(tmp_path / "a.csv", fs=fs, **COLS)


# ----- files a user gets wrong (issue 36, items 3 and 4): one sentence naming the file and the fix -----------------

def _text(log) -> tuple[str, list[str]]:
    names = list(log)
    rows = [",".join(repr(float(log[c][i])) for c in names) for i in range(log["time"].size)]
    return ",".join(names), rows


def test_a_csv_with_a_byte_order_mark_or_quoted_numbers_reads_as_the_plain_file(tmp_path, log):
    write_csv(tmp_path / "plain.csv", log)
    header, rows = _text(log)
    (tmp_path / "bom.csv").write_text("\ufeff" + header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    quoted = ['"' + r.replace(",", '","') + '"' for r in rows]
    (tmp_path / "quoted.csv").write_text('"' + header.replace(",", '","') + '"\n' + "\n".join(quoted) + "\n")
    plain = read_log(tmp_path / "plain.csv", fs=500.0, **COLS)
    for name in ("bom.csv", "quoted.csv"):
        rec = read_log(tmp_path / name, fs=500.0, **COLS)  # (quoted numbers used to read as NaN: every row rejected)
        assert rec.report.rejected_nonfinite == 0
        assert np.array_equal(rec.segments[0], plain.segments[0])


def test_the_written_table_reads_back_bit_for_bit(tmp_path, log):
    write_csv_table(tmp_path / "log.csv", log)
    names, values = read_csv_table(tmp_path / "log.csv")
    assert names == list(log) and np.array_equal(values, np.stack(list(log.values()), axis=1))


@pytest.mark.parametrize("columns, message", [
    ({}, "at least one column; got none"),
    ({"time": np.zeros((3, 2))}, "the column 'time' has the shape \\(3, 2\\)"),
    ({"time": np.zeros(3), "position": np.zeros(4)},
     "columns of one length; got the lengths {'time': 3, 'position': 4}"),
])
def test_a_table_that_is_not_columns_of_one_length_is_refused(tmp_path, columns, message):
    with pytest.raises(ValueError, match=message):
        write_csv_table(tmp_path / "log.csv", columns)


@pytest.mark.parametrize("content, message", [
    ("time,position,velocity,torque\n", r"h.csv holds the header line and no data rows"),
    ("", r"h.csv is empty; a log needs a header line"),
    ("time;position;velocity;torque\n0;1;2;3\n", r"h.csv: the header line 'time;position;velocity;torque' is "
                                                 r"separated by semicolons, not commas; save the log comma-separated"),
    ("time\tposition\tvelocity\ttorque\n0\t1\t2\t3\n", r"separated by tabs, not commas"),
    ("time,position,velocity,torque\n0,1,2,3\n0.002,1,abc,3\n", r"h.csv: line 3, column 'velocity' holds 'abc', "
                                                                 r"which is not a number; fix or remove that row"),
    ('time,position,velocity,torque\n0,1,2,3\n0.002,"1,5",2,3\n', r"line 3, column 'position' holds '1,5', which is "
                                                                  r"not a number; it uses a decimal comma"),
])
def test_a_csv_that_cannot_be_read_is_one_sentence_naming_the_file(tmp_path, content, message):
    (tmp_path / "h.csv").write_text(content)
    with pytest.raises(ValueError, match=message):
        read_log(tmp_path / "h.csv", fs=500.0, **COLS)


def test_a_truncated_or_object_npz_is_one_sentence_naming_the_file(tmp_path, log):
    np.savez(tmp_path / "good.npz", **log)
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut.npz is not a complete .npz archive \(BadZipFile: .*\); the file is "
                                         r"truncated or of another format: write it again with numpy.savez"):
        read_log(tmp_path / "cut.npz", fs=500.0, **COLS)
    np.savez(tmp_path / "objects.npz", **dict(log, time=log["time"].astype(object)))
    with pytest.raises(ValueError, match=r"objects.npz: the array 'time' holds Python objects \(dtype=object\), which "
                                         r"are not loaded"):
        read_log(tmp_path / "objects.npz", fs=500.0, **COLS)


def test_a_time_step_back_is_reported_in_plain_numbers(tmp_path, log):
    back = dict(log, time=log["time"].copy())
    back["time"][100] = back["time"][98]
    write_csv(tmp_path / "a.csv", back)
    with pytest.raises(ValueError) as err:
        read_log(tmp_path / "a.csv", fs=500.0, **COLS)
    assert "np.float64" not in str(err.value)
    assert re.search(r"\(t = 0\.19\d* s after 0\.19\d* s at row 100\)", str(err.value))
