#!/usr/bin/env bash
# ctest `python`: the tqc Python package as a user installs it.
#   run-ctest.sh BUILD_DIR SOURCE_DIR WORK_DIR CXX_COMPILER [CMAKE]
# 1. a virtual environment under WORK_DIR (kept between runs) with
#    python/requirements.txt's pinned nanobind, scikit-build-core, numpy and
#    pytest from PyPI;
# 2. cmake --install BUILD_DIR into WORK_DIR/prefix;
# 3. pip install SOURCE_DIR/python against that prefix (the package's CMake
#    project finds tqc there; it does not rebuild tqc);
# 4. pytest SOURCE_DIR/python/tests.
# Exits 77 (ctest: skipped) with a "SKIP: " line when PyPI cannot be
# reached and the environment lacks the packages, or when python3 cannot
# create a virtual environment (python3-venv missing: scripts/bootstrap.sh
# installs it).
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd) cxx=$4 cmake=${5:-cmake}
python=${TQC_PYTHON:-python3}
mkdir -p "$3"
work=$(cd "$3" && pwd)
venv=$work/venv
# tqc.quality's llama.cpp drivers (tests/test_quality_llama.py) find the
# integration, model and corpus under the build directory.
export TQC_BUILD_DIR=${TQC_BUILD_DIR:-$build}
skip() { echo "SKIP: python: $*"; exit 77; }

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv" > "$work/venv.log" 2>&1 \
    || skip "'$python -m venv' failed (install python3-venv): $(tail -1 "$work/venv.log")"
fi
py=$venv/bin/python

# pip reports requirements it already has without asking the index, so a
# second run works offline.
if ! "$py" -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
    -r "$source/python/requirements.txt" > "$work/pip-requirements.log" 2>&1; then
  if ! why=$("$py" - 2>&1 <<'EOF'
import os, sys, urllib.request
index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
try:
    urllib.request.urlopen(index + "/pip/", timeout=20)
except Exception as e:
    print(f"{index}: {e}")
    sys.exit(1)
EOF
  ); then
    skip "cannot reach the Python package index to install" \
         "python/requirements.txt (nanobind, scikit-build-core, numpy," \
         "pytest): $why"
  fi
  cat "$work/pip-requirements.log"
  echo "python: pip install -r python/requirements.txt failed with the index reachable"
  exit 1
fi

prefix=$work/prefix
rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log"

# --no-build-isolation: the build requirements (pinned in pyproject.toml)
# are the ones just installed; build-dir keeps the module's CMake build.
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --no-deps --force-reinstall \
  --config-settings=cmake.define.CMAKE_PREFIX_PATH="$prefix" \
  --config-settings=cmake.define.CMAKE_CXX_COMPILER="$cxx" \
  --config-settings=build-dir="$work/build" \
  "$source/python" > "$work/pip-tqc.log" 2>&1 \
  || { cat "$work/pip-tqc.log"; echo "python: building the tqc package failed"; exit 1; }

# The installed package, not the source tree's tqc/, is what the tests import.
cd "$work"
"$py" -c 'import tqc, sys; print("python: tqc from", tqc.__file__, "with", sys.version.split()[0])'
exec "$py" -m pytest -q -p no:cacheprovider --basetemp="$work/pytest" \
  --rootdir="$source/python" -c "$source/python/pyproject.toml" \
  "$source/python/tests"
