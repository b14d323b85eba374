"""The validation data of a train/validation split of the IAC log (`mhe.problems.iac.validation_source`)."""
import pytest

from mhe.data.logs import IACRecording
from mhe.problems.iac import validation_source
from tests.mhe.helpers import leak_problem


def on_log(part: tuple[float, ...]):
    """A problem whose source is a part of an IAC log (the log is not read)."""
    return leak_problem(inflow=0.0, noise=0.0, a=0.5).replace(recording=IACRecording("log.csv", part=part))


def test_the_validation_part_is_the_rest_of_the_stretch_or_the_part_given():
    assert validation_source(on_log((0.0, 0.7))).part == (0.7, 1.0)
    blocked = on_log((0.0, 0.03, 0.04, 0.07))
    assert validation_source(blocked).part == (0.03, 0.04, 0.07, 1.0)
    val = validation_source(blocked, [0.5, 0.6])
    assert val.part == (0.5, 0.6) and (val.path, val.align, val.dt) == ("log.csv", "next", 0.04)


def test_a_problem_on_another_recording_or_without_a_rest_is_an_error():
    with pytest.raises(ValueError, match=r"must read an mhe.data.logs.IACRecording; it reads Recording"):
        validation_source(leak_problem(inflow=0.0, noise=0.0, a=0.5))
    with pytest.raises(ValueError, match="keeps the whole stretch"):
        validation_source(on_log((0.0, 1.0)))
