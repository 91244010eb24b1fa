#!/usr/bin/env bash
# Copies HIP's headers (Debian's libamdhip64-dev: /usr/include/hip, everything the NVIDIA
# platform includes lives in it) into .hip-headers/ at the repository root, an ignored folder,
# so that a machine without Debian's packages (the GPU machine) can build the HIP backend
# through HIP's NVIDIA platform: name .hip-headers in the device tool's `carry`, then configure
# with -DONLINENORM_HIP_PLATFORM=nvidia (FindHipToolchain picks .hip-headers/ by default, or
# set -DONLINENORM_HIP_HEADERS_DIR=<dir>). The copy is unmodified: CMake patches its own copy
# of it for CUDA 13 at configure time (cmake/HipNvidiaHeaders.cmake).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
src="${1:-/usr/include}"
dst="$root/.hip-headers"
if [ ! -f "$src/hip/nvidia_detail/nvidia_hip_runtime_api.h" ]; then
  echo "pack_headers: $src/hip/nvidia_detail/nvidia_hip_runtime_api.h not found (install libamdhip64-dev)" >&2
  exit 1
fi
rm -rf "$dst"
mkdir -p "$dst"
cp -r "$src/hip" "$dst/hip"
# Only the headers the NVIDIA platform reads travel; AMD's detail folder is left out.
rm -rf "$dst/hip/amd_detail" "$dst/hip/hcc_detail" "$dst/hip/nvcc_detail"  # nvcc_detail: a link
echo "pack_headers: $(du -sh "$dst" | cut -f1) of HIP headers in $dst"
