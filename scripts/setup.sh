#!/usr/bin/env bash
# Installs the build dependencies from Debian's packages (idempotent; needs root or sudo).
# CUDA (nvcc) is used when present; HIP for AMD comes from Debian's clang-15 + ROCm 5.2.
set -euo pipefail
packages=(cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev libomp-dev
          clang-15 clang-tools-15 lld-15 llvm-15 libamdhip64-dev rocm-device-libs
          python3 python3-numpy python3-matplotlib pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
