#!/usr/bin/env bash
# Sets up (Debian packages), builds the library and the onorm tool, then runs onorm with the
# given arguments, e.g.: scripts/onorm.sh compare --op softmax --rows 512 --cols 4096 --dtype bf16
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target onorm >/dev/null
exec "$root/build/bin/onorm" "$@"
