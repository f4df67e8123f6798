# shellcheck shell=bash
# The loop of tests/cluster/run_tests.sh and tests/ssh/run_tests.sh, which source this file and call
#   run_lab_tests NAME LAB_DIR BUILD_DIR [TEST_FILE...]
# (NAME: "cluster tests"; LAB_DIR: the folder of lab.sh and the *_test.py files; default every one of those).
# It brings the lab up, runs each test file, always takes the lab down, prints how long each part took, and
# exits 1 when anything failed. The caller defines lab_logs (the last lines of its lab's logs, shown after a
# failed test) and may define check_lab_gone (after down: fails, saying why, when something of the lab is
# left).

# shellcheck source=SCRIPTDIR/lab_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lab_common.sh"  # span

run_lab_tests() {
  local name=$1 dir=$2 build=$3
  shift 3
  local tests=("$@")
  ((${#tests[@]})) || tests=("$dir"/*_test.py)
  export DISTRUN_BIN=$build/distrun
  eval "$("$dir/lab.sh" env)"

  local start up_done tests_done down_done t t_start failed=()
  start=$EPOCHREALTIME
  # Whatever happens, the lab goes down: no daemon, namespace, veth or bridge outlives the run.
  # shellcheck disable=SC2064  # the path is fixed now, not when the trap runs
  trap "$(printf '%q' "$dir/lab.sh") down" EXIT
  "$dir/lab.sh" up
  up_done=$EPOCHREALTIME

  for t in "${tests[@]}"; do
    t_start=$EPOCHREALTIME
    echo "== $(basename "$t") ==" >&2
    # Debian's interpreter: python3-torch and python3-mpi4py are installed for it only.
    if /usr/bin/python3 "$t"; then
      echo "== $(basename "$t"): passed in $(span "$t_start")s ==" >&2
    else
      echo "== $(basename "$t"): FAILED after $(span "$t_start")s ==" >&2
      failed+=("$(basename "$t")")
      echo "== lab logs (last lines) ==" >&2
      lab_logs >&2 2>/dev/null || true
    fi
  done
  tests_done=$EPOCHREALTIME

  trap - EXIT
  "$dir/lab.sh" down
  down_done=$EPOCHREALTIME
  if declare -F check_lab_gone >/dev/null && ! check_lab_gone; then failed+=("lab.sh down"); fi
  echo "$name: lab up $(span "$start" "$up_done")s, tests $(span "$up_done" "$tests_done")s," \
    "down $(span "$tests_done" "$down_done")s, total $(span "$start")s" >&2
  if ((${#failed[@]})); then
    echo "$name FAILED: ${failed[*]}" >&2
    exit 1
  fi
  echo "$name passed" >&2
}
