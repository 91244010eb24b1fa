#!/usr/bin/env bash
# Installs the Python package (python/) into a virtual environment under build/ and runs its
# tests. It packages the release build's library (build/lib, with the GPU modules built there)
# when scripts/test.sh has built it, else builds the library of the tree. Torch is not installed
# here (its wheels are too large for CI's time): the torch tests skip unless it is present.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/pyenv
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest
settings=("--config-settings=build-dir=$PWD/build/python")
if [ -e build/lib/libonlinenorm.so.0 ]; then
  settings+=("--config-settings=cmake.define.ONLINENORM_PREBUILT_LIBRARY=$PWD/build/lib/libonlinenorm.so.0")
  # Its reference and tool libraries too, where that build made them (not compiled again).
  if [ -e build/tools/libonorm_compare.a ]; then
    settings+=("--config-settings=cmake.define.ONLINENORM_PREBUILT_BUILD_DIR=$PWD/build")
  fi
fi
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation "${settings[@]}" ./python
# From outside the source folder, so that the installed package is the one imported.
cd build && pyenv/bin/python -m pytest -q ../python/tests
