#!/usr/bin/env bash
# Brings the ssh lab up, runs the ssh tests against BUILD_DIR/distrun, and always takes the lab down.
#   tests/ssh/run_tests.sh [BUILD_DIR] [TEST_FILE...]     (default: build/release, every *_test.py)
# Run as root. Prints how long each part took. BUILD_DIR/distrun is not checked here: lab_test.py needs
# none, and a test that runs distrun (ssh_harness.DistrunSshCase) fails without it. After the lab is down,
# `lab.sh status` must say that nothing of it is left. The loop is tests/lab_kit/run_lab_tests.sh, shared
# with the cluster tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath -m "${1:-build/release}")

lab_logs() { tail -n 15 "$DISTRUN_SSH_LAB_DIR"/hosts/*/sshd.log; }

# `down` checks its own work; status looks again from outside, at everything a lab could leave (exit 3:
# nothing).
check_lab_gone() {
  local status=0
  "$here/lab.sh" status 2>/dev/null || status=$?
  ((status != 3)) || return 0
  echo "ssh tests: the lab is not completely down after lab.sh down (status $status):" >&2
  "$here/lab.sh" status >&2 || true
  return 1
}

# shellcheck source=SCRIPTDIR/../lab_kit/run_lab_tests.sh
source "$here/../lab_kit/run_lab_tests.sh"
run_lab_tests "ssh tests" "$here" "$build" "${@:2}"
