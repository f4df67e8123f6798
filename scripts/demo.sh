#!/usr/bin/env bash
# From a fresh machine: install dependencies, build, and run distrun's main job on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
echo "== distrun --detect (what distrun infers on this machine) =="
build/release/distrun --detect
