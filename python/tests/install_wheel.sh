#!/usr/bin/env bash
# Builds the svattn wheel from an existing CMake build and installs it into a throw-away virtual
# environment, so that the pytest suite runs against the installed package, not the build tree
# (ctest's fixture python.install; docs/python.md "Install").
#
#   python/tests/install_wheel.sh BUILD_DIR VENV_DIR [PYTHON]
#
# The venv sees the system's site-packages (Debian's numpy, torch, pytest: no downloads); pip
# builds without isolation and installs with --no-index. Compiles nothing: setup.py copies the
# extensions CMake built in BUILD_DIR.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?build directory}" && pwd)
venv=${2:?venv directory}
py=${3:-/usr/bin/python3}

rm -rf "$venv" "$build/python-wheel"
"$py" -m venv --system-site-packages "$venv"
export SVATTN_BUILD_DIR="$build" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
"$venv/bin/python" -m pip wheel -q --no-build-isolation --no-deps --no-index \
  -w "$build/python-wheel" "$src"
"$venv/bin/python" -m pip install -q --no-index --no-deps "$build"/python-wheel/svattn-*.whl
# From / : the current directory must not shadow the installed package (build/python has svattn/).
cd / && "$venv/bin/python" - <<'PY'
import os, sys, svattn
where = os.path.dirname(svattn.__file__)
assert where.startswith(sys.prefix), f"svattn imported from {where}, not from the venv {sys.prefix}"
print(f"install_wheel: svattn {svattn.__version__} installed in {where}")
PY
