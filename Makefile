# Two entry points that work on a fresh machine with Python 3.11 and a C compiler:
#   make demo   set up .venv (once) and run the main job
#   make test   set up .venv (once) and run the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The C port's tests need clang-14 with libFuzzer, the Arm and RISC-V embedded gccs with their C
# libraries (newlib, picolibc) and QEMU for both: Debian packages, installed once with apt-get
# when a package is missing (dpkg's record; without dpkg, when a tool is missing), as root or through sudo.
C_TOOLS    := clang-14 arm-none-eabi-gcc qemu-system-arm riscv64-unknown-elf-gcc qemu-system-riscv32 \
              xtensa-lx106-elf-gcc
C_PACKAGES := clang-14 libclang-rt-14-dev gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm \
              gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc \
              gcc-xtensa-lx106 binutils-xtensa-lx106 picolibc-xtensa-lx106-elf

.PHONY: demo test clean c-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# torch first, pinned to the CPU wheel, so that nothing later pulls a CUDA build;
# l4casadi builds from source against the installed torch, so it needs its build tools first.
$(STAMP): setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install "setuptools>=68.1" "scikit-build>=0.17" "cmake>=3.27" "ninja>=1.11" wheel
	CMAKE_POLICY_VERSION_MINIMUM=3.5 $(BIN)/pip install --no-build-isolation "l4casadi>=2.0"
	$(BIN)/pip install -e ".[dev,mhe,peers]"
	touch $@

demo: $(STAMP)
	$(BIN)/torch-ude fit --config configs/pendulum_case_a.yaml

c-tools:
	@missing=""; \
	if command -v dpkg-query >/dev/null 2>&1; then \
	  for p in $(C_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	else \
	  for t in $(C_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing the C toolchains (missing:$$missing)"; \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $(C_PACKAGES) >/dev/null \
	    || { echo "could not install $(C_PACKAGES) with apt-get; install them and rerun"; exit 1; }; \
	fi

test: $(STAMP) c-tools
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) *.egg-info
