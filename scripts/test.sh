#!/usr/bin/env bash
# From a fresh machine: install dependencies, then build and run the whole test suite: the release build,
# the cluster tests on a Slurm lab of virtual hosts, the same tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, and a bounded fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

fuzz_seconds=${DISTRUN_FUZZ_SECONDS:-30}
export CTEST_OUTPUT_ON_FAILURE=1

echo "== release build and tests =="
scripts/build.sh release
# The Python wheel, as README builds it; tests/integration/wheel_test.py installs it into fresh venvs.
DISTRUN_WHEEL=$(scripts/build.sh wheel | tail -n 1)
export DISTRUN_WHEEL
echo "wheel: $DISTRUN_WHEEL"
ctest --test-dir build/release -j 2 --timeout 600

echo "== hot-path guard (ratios beside the recorded ones; timing never fails it) =="
timeout 300 build/release/bench/distrun-bench guard --distrun build/release/distrun ||
  echo "hot-path guard: did not run to the end"

echo "== cluster tests (a Slurm lab of virtual hosts, Open MPI, MPICH) =="
# Brings the lab up, runs tests/cluster/*_test.py against build/release/distrun, and always takes it down.
tests/cluster/run_tests.sh build/release

echo "== ASan+UBSan build and tests =="
unset DISTRUN_WHEEL
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
scripts/build.sh asan
ctest --test-dir build/asan -j 2 --timeout 900

echo "== fuzzing (${fuzz_seconds}s per target) =="
tests/fuzz/run_fuzzers.sh build/fuzz "$fuzz_seconds"
echo "all test stages passed"
