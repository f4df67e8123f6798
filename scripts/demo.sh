#!/usr/bin/env bash
# From a fresh machine: install what the build and the main job need (not the test labs, Chromium,
# Prometheus or the wheel's Debian 11 parts: scripts/test.sh installs those), build, and run distrun's main
# job on its embedded default: what distrun detects here, then a real 4-worker PyTorch (gloo) all-reduce
# launched by distrun.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --demo
# distrun alone (with its sentinel and runtime module): the tests and benchmarks are scripts/test.sh's.
scripts/build.sh release build/release distrun
echo "== distrun --detect (what distrun infers on this machine) =="
build/release/distrun --detect
echo "== a real launch: 4 PyTorch workers all-reduce over gloo =="
build/release/distrun --nproc-per-node 4 -- /usr/bin/python3 examples/torch_allreduce.py
