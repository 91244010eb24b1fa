#!/usr/bin/env bash
# Installs the build dependencies from Debian's packages (idempotent; needs root or sudo).
# CUDA (nvcc) is used when present; HIP for AMD comes from Debian's clang + ROCm 5.2.3
# (libamdhip64-dev, rocm-device-libs). clang-15 compiles gfx90a, gfx940 and gfx1030; clang-19
# (Debian 12 main since 12.11), installed where the package lists offer it, adds gfx942
# (MI300) and is then the compiler CMake picks (cmake/FindHipToolchain.cmake).
set -euo pipefail
# libdnnl-dev: oneDNN, the CPU benchmark's peer (bench/cpu/onednn_peer.hpp).
packages=(cmake g++ make ninja-build libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev libomp-dev
          clang-15 clang-tools-15 lld-15 llvm-15 libamdhip64-dev rocm-device-libs
          python3 python3-numpy python3-matplotlib pkg-config libdnnl-dev
          python3-venv python3-dev)  # the last two: the Python package's venv and extension (scripts/python_test.sh)
# clang-tools-19: the offload bundler; lld-19: the AMD GPU linker; libclang-rt-19-dev: the
# builtins library CMake's hip-lang package requires.
optional=(clang-19 clang-tools-19 lld-19 libclang-rt-19-dev)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
missing_optional=()
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_optional[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # The optional set only whole, and only where every package of it has a candidate.
  for p in "${missing_optional[@]}"; do
    if apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: (none)' \
       || [ -z "$(apt-cache policy "$p" 2>/dev/null)" ]; then
      echo "setup: $p is not offered here; the HIP backend builds without gfx942"
      missing_optional=(); break
    fi
  done
  missing+=("${missing_optional[@]}")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
