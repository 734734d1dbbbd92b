#!/usr/bin/env bash
# The README's first command: set up, build, and run the main job on the
# built-in example.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/bootstrap.sh"
"$root/scripts/build.sh"
build="${TQC_BUILD_DIR:-$root/build}"
"$build/bin/tq-quant" formats
echo
"$build/bin/tq-quant" demo
