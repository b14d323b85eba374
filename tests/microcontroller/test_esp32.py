"""The ESP32 projects (ESP-IDF component and app, Arduino library, PlatformIO). No ESP32 toolchain
can be installed here, so: each project's files are checked against its ecosystem's documented
layout; the one documented command (``python -m microcontroller.generate ... --with-sources``)
writes the sources into copies of the projects in tmp_path, which must then hold everything they
compile; their code is compiled with the projects' own flags by the host compilers against stub
platform headers, by ``arm-none-eabi-gcc`` without ``-ffp-contract=off`` (no fused multiply-add may
appear: the Arduino IDE cannot pass that flag), and by Debian's Xtensa gcc (the ESP8266's LX106,
the nearest Debian has to the ESP32's LX6); the training task's stack is checked against the
deepest call path of the Cortex-M4F build."""
import configparser
import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from microcontroller.build import ROOT, WARNINGS
from microcontroller.generate import library_files, main as generate
from microcontroller.target import CORTEX_M4

ESP32 = ROOT / "esp32"
STUBS = ROOT.parent / "tests" / "microcontroller" / "stubs"
CONFIG = "configs/pendulum_case_a_c.yaml"
GENERATED = {"tu_config.h", "tu_model_data.h", "tu_plant_code.h"}
ARM = "arm-none-eabi-gcc"
XTENSA = "xtensa-lx106-elf-gcc"
XTENSA_SPECS = Path("/usr/lib/xtensa-lx106-elf/picolibc.specs")
#: library.properties, Arduino library specification 1.5: the required keys and the categories.
ARDUINO_KEYS = {"name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url", "architectures"}
ARDUINO_CATEGORIES = {"Display", "Communication", "Signal Input/Output", "Sensors", "Device Control", "Timing",
                      "Data Storage", "Data Processing", "Other"}
#: idf_component.yml keys of the IDF component manager's manifest reference.
IDF_MANIFEST_KEYS = {"version", "description", "url", "repository", "documentation", "issues", "discussion",
                     "license", "maintainers", "tags", "targets", "dependencies", "files", "examples"}
#: The training task's stack over the measured path: twice it (Xtensa frames) plus printf's 4 KiB.
STACK_FACTOR, STACK_EXTRA = 2, 4096


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """A copy of microcontroller/esp32 (without anything generated there) with the sources written
    into the Arduino library and the ESP-IDF component by the documented command."""
    root = tmp_path_factory.mktemp("esp32") / "esp32"
    shutil.copytree(ESP32, root, ignore=shutil.ignore_patterns("tu_*", ".pio", "build", "sdkconfig"))
    for out in (root / "arduino" / "TorchUDE" / "src", root / "idf" / "components" / "torch_ude"):
        assert generate(["--config", CONFIG, "--with-sources", "--out", str(out)]) == 0
    return root


def _includes(path: Path) -> list[str]:
    return re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), re.M)


def _assert_self_contained(folder: Path) -> None:
    """``folder`` holds the library, the application and the generated headers, and every quoted
    include of its files names a file beside it (no path reaches outside the folder)."""
    names = {p.name for p in folder.iterdir()}
    missing = ({p.name for p in library_files()} | GENERATED) - names
    assert not missing, f"{folder} lacks {sorted(missing)}"
    for path in folder.iterdir():
        if path.suffix in (".c", ".h"):
            for inc in _includes(path):
                assert "/" not in inc and inc in names, f"{path.name} includes {inc!r}, not a file of {folder}"


def _compile(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


def test_the_arduino_library_follows_the_library_specification(projects):
    library = projects / "arduino" / "TorchUDE"
    props = dict(line.split("=", 1) for line in (library / "library.properties").read_text().splitlines()
                 if line.strip() and not line.startswith("#"))
    assert ARDUINO_KEYS <= set(props), f"library.properties lacks {sorted(ARDUINO_KEYS - set(props))}"
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 _.\-]*", props["name"]) and props["name"] == library.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", props["version"]) and props["category"] in ARDUINO_CATEGORIES
    assert "esp32" in props["architectures"].split(",")
    for header in props.get("includes", "").split(","):
        assert (library / "src" / header.strip()).is_file(), f"includes names {header!r}, not a header of src/"
    examples = [p for p in (library / "examples").iterdir() if p.is_dir()]
    assert examples and all((p / f"{p.name}.ino").is_file() for p in examples)
    # the 1.5 layout compiles src/ only: the sources must be there, and nothing may include a file outside
    _assert_self_contained(library / "src")
    # the repository holds the library's own files only: the rest is written by the command
    tracked = subprocess.run(["git", "ls-files", str(ESP32 / "arduino" / "TorchUDE" / "src")], capture_output=True,
                             text=True, cwd=ROOT).stdout.split()
    assert [Path(p).name for p in tracked] == ["TorchUDE.h"]


def test_the_esp_idf_component_is_self_contained_and_the_app_trains_in_its_own_task(projects):
    idf = projects / "idf"
    component = idf / "components" / "torch_ude"
    manifest = yaml.safe_load((component / "idf_component.yml").read_text())
    assert set(manifest) <= IDF_MANIFEST_KEYS, f"unknown manifest keys {sorted(set(manifest) - IDF_MANIFEST_KEYS)}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"]) and manifest["description"]
    assert re.fullmatch(r">=\s*5(\.\d+)*", manifest["dependencies"]["idf"]["version"])
    cmake = (component / "CMakeLists.txt").read_text()
    register = re.search(r"idf_component_register\(([^)]*)\)", cmake)
    assert register and re.search(r'SRC_DIRS\s+"\."', register.group(1)) and \
        re.search(r'INCLUDE_DIRS\s+"\."', register.group(1))
    assert ".." not in cmake
    _assert_self_contained(component)
    project = (idf / "CMakeLists.txt").read_text()
    assert "tools/cmake/project.cmake" in project and re.search(r"^project\(\w+\)", project, re.M)
    assert re.search(r"REQUIRES[^)]*\btorch_ude\b", (idf / "main" / "CMakeLists.txt").read_text())
    defaults = (idf / "sdkconfig.defaults").read_text().splitlines()
    assert "CONFIG_ESP_DEFAULT_CPU_FREQ_MHZ_240=y" in defaults and "CONFIG_COMPILER_OPTIMIZATION_PERF=y" in defaults
    app = (idf / "main" / "app_main.c").read_text()
    assert re.search(r"xTaskCreatePinnedToCore\(train,", app) and "vTaskDelay(" in app
    assert "tu_app_simulate" not in app.split("void app_main")[1], "app_main must leave the training to its task"


def test_platformio_links_the_arduino_library_by_lib_deps(projects):
    ini = configparser.ConfigParser()
    ini.read(projects / "platformio.ini")
    assert not any(ini.has_option(s, "lib_extra_dirs") for s in ini.sections()), "PlatformIO 6 ignores lib_extra_dirs"
    envs = [s for s in ini.sections() if s.startswith("env:")]
    assert envs
    for env in envs:
        assert ini[env]["platform"] == "espressif32" and ini[env]["framework"] == "arduino"
        assert not ini.has_option(env, "build_flags"), "the library must build without extra flags"
        deps = [d.strip() for d in ini[env]["lib_deps"].splitlines() if d.strip()]
        links = [re.fullmatch(r"(\w+)=symlink://(.+)", d) for d in deps]
        assert links and all(links), f"{env}: lib_deps {deps} is not NAME=symlink://PATH"
        for link in links:
            props = projects / link.group(2) / "library.properties"
            assert props.is_file(), f"{env}: symlink://{link.group(2)} is no Arduino library of {projects}"
            assert f"name={link.group(1)}" in props.read_text().splitlines()
    src = projects / ini["platformio"]["src_dir"]
    assert list(src.glob("*.ino"))


def test_the_esp_idf_app_compiles_with_the_project_flags(projects, tmp_path):
    # ESP-IDF 5 compiles C as gnu17, with -Wall -Wextra, and the component adds its own warnings
    component = projects / "idf" / "components" / "torch_ude"
    flags = ["-std=gnu17", "-O2", "-Wall", "-Wextra", "-Wshadow", "-Wdouble-promotion", "-Werror"]
    _compile(["gcc", *flags, "-c", "-I", str(STUBS), "-I", str(component), str(projects / "idf" / "main" / "app_main.c"),
              *map(str, sorted(component.glob("*.c")))], tmp_path)


def test_the_arduino_library_and_example_compile_with_the_host_compilers(projects, tmp_path):
    src = projects / "arduino" / "TorchUDE" / "src"
    # Arduino-ESP32 compiles a library's C as gnu99 (core 2.x) or gnu17 (3.x), its sketches as C++
    for std in ("gnu99", "gnu17"):
        _compile(["gcc", f"-std={std}", "-Os", "-Wall", "-Wextra", "-Werror", "-c", "-I", str(src),
                  *map(str, sorted(src.glob("*.c")))], tmp_path)
    if shutil.which("g++") is None:
        pytest.fail("g++ is needed to compile the Arduino sketch (Debian's g++ package).")
    sketch = tmp_path / "TrainPendulum.cpp"
    sketch.write_text('#include <Arduino.h>\n' + (src.parent / "examples" / "TrainPendulum"
                                                  / "TrainPendulum.ino").read_text())
    _compile(["g++", "-std=gnu++17", "-Wall", "-Wextra", "-Werror", "-c", "-I", str(STUBS), "-I", str(src),
              str(sketch)], tmp_path)


def _fused(obj: Path) -> int:
    dump = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    return len(re.findall(r"\bv(?:fma|fms|fnma|fnms)\b", dump))


def test_no_fused_multiply_add_without_compiler_flags(projects, tmp_path):
    if shutil.which(ARM) is None:
        pytest.skip(f"{ARM} is not installed; `make test` installs {CORTEX_M4.packages}.")
    src = projects / "arduino" / "TorchUDE" / "src"
    arm = [ARM, *CORTEX_M4.flags, "-std=gnu17", "-O2", "-Wall", "-Wextra", "-Werror", "-c", "-I", str(src)]
    counts = {}
    for skip_pragma in (False, True):  # with tu_fp.h's guard predefined, its pragma is skipped
        total = 0
        for source in sorted(src.glob("*.c")):
            obj = tmp_path / f"{source.stem}.o"
            _compile([*arm, *(["-DTU_FP_H"] if skip_pragma else []), str(source), "-o", str(obj)], tmp_path)
            total += _fused(obj)
        counts[skip_pragma] = total
    assert counts[True] > 0, "without the pragma GCC fuses under gnu17: the check must see VFMA"
    assert counts[False] == 0, f"{counts[False]} fused multiply-adds in the library without -ffp-contract=off"


def test_every_library_source_compiles_for_xtensa(projects, tmp_path):
    if shutil.which(XTENSA) is None or not XTENSA_SPECS.is_file():
        pytest.skip(f"{XTENSA} or picolibc is not installed; `make test` installs gcc-xtensa-lx106, "
                    f"binutils-xtensa-lx106 and picolibc-xtensa-lx106-elf with apt-get.")
    src = projects / "arduino" / "TorchUDE" / "src"
    sources = sorted(src.glob("*.c"))
    assert {p.name for p in sources} == {p.name for p in library_files() if p.suffix == ".c"}
    for source in sources:
        _compile([XTENSA, f"--specs={XTENSA_SPECS}", "-mlongcalls", *WARNINGS, "-O2", "-c", "-I", str(src),
                  str(source), "-o", str(tmp_path / f"{source.stem}.o")], tmp_path)


def deepest_stack_path(folder: Path, root: str) -> tuple[int, list[str]]:
    """The deepest stack of the calls from ``root``, from GCC's ``-fcallgraph-info=su`` files
    (``*.ci``) in ``folder``: bytes and the path of function names. Functions without a frame in
    them (the C library, libgcc, calls through pointers) count 0 bytes."""
    frames, calls = {}, {}
    for ci in folder.glob("*.ci"):
        text = ci.read_text()
        for title, label in re.findall(r'node: \{ title: "([^"]+)" label: "([^"]*)"', text):
            frame = re.search(r"(\d+) bytes \(([\w,]+)\)", label)
            if frame:
                assert frame.group(2) == "static", f"{title} has a {frame.group(2)} stack frame"
                frames[title] = int(frame.group(1))
        for source, target in re.findall(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
            calls.setdefault(source, set()).add(target)

    def defined(name: str, caller: str) -> str:  # a static function's node is "file:name"
        local = f"{caller.rsplit(':', 1)[0]}:{name}"
        return local if ":" in caller and local in frames else name

    @functools.lru_cache(maxsize=None)
    def deepest(node: str, depth: int = 0) -> tuple[int, tuple[str, ...]]:
        assert depth < 64, f"recursion through {node}: the stack is unbounded"
        below = max((deepest(defined(t, node), depth + 1) for t in calls.get(node, ())), default=(0, ()))
        return frames.get(node, 0) + below[0], (node.rsplit(":", 1)[-1], *below[1])

    total, path = deepest(root)
    return total, list(path)


def test_the_training_task_stack_covers_the_deepest_call_path(projects, tmp_path):
    if shutil.which(ARM) is None:
        pytest.skip(f"{ARM} is not installed; `make test` installs {CORTEX_M4.packages}.")
    src = projects / "arduino" / "TorchUDE" / "src"
    for source in sorted(src.glob("*.c")):
        _compile([ARM, *CORTEX_M4.flags, *WARNINGS, "-O2", "-c", "-fcallgraph-info=su", "-I", str(src), str(source),
                  "-o", str(tmp_path / f"{source.stem}.o")], tmp_path)
    need, path = deepest_stack_path(tmp_path, "tu_app_simulate")
    assert len(path) >= 3, f"the call graph was not read: {path} ({need} bytes)"
    stack = int(re.search(r"#define TU_TASK_STACK (\d+)", (projects / "idf" / "main" / "app_main.c").read_text())
                .group(1))
    assert stack >= STACK_FACTOR * need + STACK_EXTRA, \
        f"TU_TASK_STACK {stack} < {STACK_FACTOR} x {need} bytes (path {' > '.join(path)}) + {STACK_EXTRA}"
