"""Tape bytes, the profiler's heap peak and MAC count of one iteration."""
from baselines.accounting import account_iteration, matmul_macs, measure_iteration, tape_breakdown
from baselines.shooting import ShootingObjective
from tests.baselines.helpers import short_windows
from tests.torch_ude.helpers import random_field


def test_profiled_macs_match_the_count_from_the_layer_widths():
    field = random_field("single", "A", 0)
    windows = short_windows("single", 3, 4)
    objective = ShootingObjective(field, windows)
    cost = measure_iteration(objective.gradient)
    assert cost.matmul_macs == matmul_macs(field, 3, 4) == 4 * 3 * 4 * (4 * 320 - 32 + 4)


def test_profiled_macs_of_a_field_with_the_linear_term_match_the_count():
    field = random_field("single", "A", 0, linear=True)
    objective = ShootingObjective(field, short_windows("single", 3, 4))
    cost = measure_iteration(objective.gradient)
    assert cost.matmul_macs == matmul_macs(field, 3, 4) == 4 * 3 * 4 * (4 * 320 - 32 + 4 + 3 * 2 * 2)


def test_heap_peak_covers_the_tape_allocated_inside_the_iteration():
    field = random_field("single", "A", 0)
    windows = short_windows("single", 20, 16)
    objective = ShootingObjective(field, windows)
    reused = measure_iteration(objective.gradient)
    fresh = measure_iteration(lambda: ShootingObjective(field, windows).gradient())
    tape = tape_breakdown(objective.tape)
    assert tape["total"] == objective.tape.nbytes == tape["stages"] + tape["hidden"] + tape["states"]
    assert fresh.peak_heap_bytes >= tape["total"]
    assert reused.peak_heap_bytes < fresh.peak_heap_bytes  # the reused tape is not allocated again
    assert fresh.peak_heap_bytes - reused.peak_heap_bytes >= 0.9 * tape["total"]


def test_double_pendulum_count_uses_its_widths():
    field = random_field("double", "A", 0)
    products = 4 * 16 + 16 * 16 + 16 * 4
    assert matmul_macs(field, 2, 3) == 4 * 2 * 3 * (4 * products - 4 * 16 + 16)


def test_account_iteration_gathers_the_tape_the_peak_the_macs_and_the_time():
    field = random_field("single", "A", 0)
    windows = short_windows("single", 5, 8)
    row = account_iteration(field, windows, field.in_scale, repeats=2)
    assert row["tape"] == tape_breakdown(ShootingObjective(field, windows).tape)
    assert row["peak_heap_bytes"] >= row["tape"]["total"]
    assert row["matmul_macs_profiled"] == row["matmul_macs_counted"] == matmul_macs(field, 5, 8)
    assert row["iteration_s"] > 0
