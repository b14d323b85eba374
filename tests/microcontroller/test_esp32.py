"""The ESP32 projects (ESP-IDF component, Arduino library, PlatformIO): no Xtensa toolchain can be
installed here, so check that they compile exactly the library's sources, with nothing copied,
and that their code compiles with the host compilers against stub platform headers."""
import re
import shutil
import subprocess

import pytest

from microcontroller.build import ROOT, WARNINGS, library_sources
from microcontroller.generate import spec_from_config, write_headers

ESP32 = ROOT / "esp32"
APP = {"tu_eval.c", "tu_app.c"}  # the on-device application's support sources
STUBS = ROOT.parent / "tests" / "microcontroller" / "stubs"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("esp32-gen")
    write_headers(spec_from_config("configs/pendulum_case_a.yaml", ["--model.stream.tap_average", "false", "--model.stream.capacity", "2048",
                                                                    "--model.stream.m_max", "50"]), folder)
    return folder


def test_every_project_builds_exactly_the_library_sources():
    library = {p.name for p in library_sources()}
    cmake = (ESP32 / "idf" / "components" / "torch_ude" / "CMakeLists.txt").read_text()
    assert set(re.findall(r"\$\{TU_ROOT\}/src/(tu_\w+\.c)", cmake)) == library
    assert set(re.findall(r"\$\{TU_ROOT\}/support/(tu_\w+\.c)", cmake)) == APP
    unity = (ESP32 / "arduino" / "TorchUDE" / "src" / "torch_ude_sources.c").read_text()
    assert set(re.findall(r'#include "\.\./\.\./\.\./\.\./src/(tu_\w+\.c)"', unity)) == library
    assert set(re.findall(r'#include "\.\./\.\./\.\./\.\./support/(tu_\w+\.c)"', unity)) == APP
    forwarders = {p.name for p in (ESP32 / "arduino" / "TorchUDE" / "src").glob("tu_*.h")} - {"tu_config.h",
                                                                                               "tu_model_data.h"}
    assert forwarders == {p.name for p in (ROOT / "include").glob("*.h")} | {"tu_app.h", "tu_eval.h"}
    assert not list(ESP32.rglob("*.c")) or all(len(p.read_text().splitlines()) < 80 for p in ESP32.rglob("*.c"))
    ini = (ESP32 / "platformio.ini").read_text()
    assert "lib_extra_dirs = arduino" in ini and "src_dir = arduino/TorchUDE/examples/TrainPendulum" in ini


def test_the_esp_idf_app_compiles_with_the_host_gcc(generated, tmp_path):
    sources = [ESP32 / "idf" / "main" / "app_main.c", *library_sources(), *(ROOT / "support" / n for n in APP)]
    cmd = ["gcc", *WARNINGS, "-O2", "-c", "-I", str(STUBS), "-I", str(ROOT / "include"), "-I", str(ROOT / "support"),
           "-I", str(generated), *map(str, sources)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_arduino_library_and_example_compile_with_the_host_compilers(generated, tmp_path):
    src = ESP32 / "arduino" / "TorchUDE" / "src"
    # Arduino's include path: the library's src/ (forwarding headers), then the generated headers
    proc = subprocess.run(["gcc", *WARNINGS, "-O2", "-c", "-I", str(src), "-I", str(generated),
                           str(src / "torch_ude_sources.c")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("g++") is None:
        pytest.fail("g++ is needed to compile the Arduino sketch (Debian's g++ package).")
    sketch = tmp_path / "TrainPendulum.cpp"
    sketch.write_text('#include <Arduino.h>\n' + (ESP32 / "arduino" / "TorchUDE" / "examples" / "TrainPendulum"
                                                  / "TrainPendulum.ino").read_text())
    proc = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-c", "-I", str(STUBS), "-I", str(src),
                           "-I", str(generated), str(sketch)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
