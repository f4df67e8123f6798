#!/usr/bin/env bash
# Brings the Slurm lab up, runs the cluster tests against BUILD_DIR/distrun, and always takes the lab down.
#   tests/cluster/run_tests.sh [BUILD_DIR] [TEST_FILE...]     (default: build/release, every *_test.py)
# Run as root. Prints how long each part took. The loop is tests/lab_kit/run_lab_tests.sh, shared with the
# ssh tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build/release}" && pwd)
[[ -x $build/distrun ]] || { echo "run_tests: no distrun in $build; build it first" >&2; exit 2; }
export DISTRUN_FIXTURES_DIR=${DISTRUN_FIXTURES_DIR:-$here/../fixtures}

lab_logs() { tail -n 15 "$DISTRUN_LAB_DIR"/ctld/slurmctld.log "$DISTRUN_LAB_DIR"/nodes/*/slurmd.log; }

# shellcheck source=SCRIPTDIR/../lab_kit/run_lab_tests.sh
source "$here/../lab_kit/run_lab_tests.sh"
run_lab_tests "cluster tests" "$here" "$build" "${@:2}"
