#!/usr/bin/env bash
# Brings the ssh lab up, runs the ssh tests against BUILD_DIR/distrun, and always takes the lab down.
#   tests/ssh/run_tests.sh [BUILD_DIR] [TEST_FILE...]     (default: build/release, every *_test.py)
# Run as root. Prints how long each part took. BUILD_DIR/distrun is not checked here: lab_test.py needs
# none, and a test that runs distrun (ssh_harness.DistrunSshCase) fails without it. After the lab is down,
# `lab.sh status` must say that nothing of it is left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath -m "${1:-build/release}")
shift $(($# > 0 ? 1 : 0))
tests=("$@")
((${#tests[@]})) || tests=("$here"/*_test.py)

export DISTRUN_BIN=$build/distrun
eval "$("$here/lab.sh" env)"

lab_logs() {
  echo "== lab logs (last lines) ==" >&2
  tail -n 15 "$DISTRUN_SSH_LAB_DIR"/hosts/*/sshd.log >&2 2>/dev/null || true
}
# span A [B]: seconds from A to B (default: now), two decimals.
span() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.2f", b - a }'; }

start=$EPOCHREALTIME
# Whatever happens, the lab goes down: no sshd, namespace, veth or bridge outlives this script.
trap '"$here/lab.sh" down' EXIT
"$here/lab.sh" up
up_done=$EPOCHREALTIME

failed=()
for t in "${tests[@]}"; do
  t_start=$EPOCHREALTIME
  echo "== $(basename "$t") ==" >&2
  # Debian's interpreter, as for the cluster tests.
  if /usr/bin/python3 "$t"; then
    echo "== $(basename "$t"): passed in $(span "$t_start")s ==" >&2
  else
    echo "== $(basename "$t"): FAILED after $(span "$t_start")s ==" >&2
    failed+=("$(basename "$t")")
    lab_logs
  fi
done
tests_done=$EPOCHREALTIME

trap - EXIT
"$here/lab.sh" down
down_done=$EPOCHREALTIME
status=0
"$here/lab.sh" status 2>/dev/null || status=$?
if ((status != 3)); then
  echo "ssh tests: the lab is not completely down after lab.sh down (status $status):" >&2
  "$here/lab.sh" status >&2 || true
  failed+=("lab.sh down")
fi
echo "ssh tests: lab up $(span "$start" "$up_done")s, tests $(span "$up_done" "$tests_done")s," \
  "down $(span "$tests_done" "$down_done")s, total $(span "$start")s" >&2
if ((${#failed[@]})); then
  echo "ssh tests FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "ssh tests passed" >&2
