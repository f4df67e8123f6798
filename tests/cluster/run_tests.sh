#!/usr/bin/env bash
# Brings the Slurm lab up, runs the cluster tests against BUILD_DIR/distrun, and always takes the lab down.
#   tests/cluster/run_tests.sh [BUILD_DIR] [TEST_FILE...]     (default: build/release, every *_test.py)
# Run as root. Prints how long each part took.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build/release}" && pwd)
shift $(($# > 0 ? 1 : 0))
tests=("$@")
((${#tests[@]})) || tests=("$here"/*_test.py)

[[ -x $build/distrun ]] || { echo "run_tests: no distrun in $build; build it first" >&2; exit 2; }
export DISTRUN_BIN=$build/distrun
export DISTRUN_FIXTURES_DIR=${DISTRUN_FIXTURES_DIR:-$here/../fixtures}
eval "$("$here/lab.sh" env)"

lab_logs() {
  echo "== lab logs (last lines) ==" >&2
  tail -n 15 "$DISTRUN_LAB_DIR"/ctld/slurmctld.log "$DISTRUN_LAB_DIR"/nodes/*/slurmd.log >&2 2>/dev/null || true
}

start=$SECONDS
# Whatever happens, the lab goes down: no daemon, namespace or bridge outlives this script.
trap '"$here/lab.sh" down' EXIT
"$here/lab.sh" up
up_done=$SECONDS

failed=()
for t in "${tests[@]}"; do
  t_start=$SECONDS
  echo "== $(basename "$t") ==" >&2
  # Debian's interpreter: python3-torch and python3-mpi4py are installed for it only.
  if /usr/bin/python3 "$t"; then
    echo "== $(basename "$t"): passed in $((SECONDS - t_start))s ==" >&2
  else
    echo "== $(basename "$t"): FAILED after $((SECONDS - t_start))s ==" >&2
    failed+=("$(basename "$t")")
    lab_logs
  fi
done
tests_done=$SECONDS

trap - EXIT
"$here/lab.sh" down
echo "cluster tests: lab up $((up_done - start))s, tests $((tests_done - up_done))s, down $((SECONDS - tests_done))s, total $((SECONDS - start))s" >&2
if ((${#failed[@]})); then
  echo "cluster tests FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "cluster tests passed" >&2
