#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/*_fuzz.cc) with clang-14, ASan and UBSan, and runs each for
# SECONDS on a scratch copy of its seed corpus (tests/fuzz/corpus/<name without _fuzz>/, if present),
# so that runs never dirty the repository. Exits non-zero if any target finds a crash, a sanitizer
# report, a leak or a slow input; the reproducers are copied to BUILD_DIR/fuzz-findings/.
#
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
#
# With TARGETs (e.g. hostlist_fuzz) only those are built and run.
# FUZZ_BUILD_JOBS (default 2) bounds the build's parallelism. FUZZ_RUNS=N ends a target after N executions
# (SECONDS stays its limit): `FUZZ_RUNS=10000000 tests/fuzz/run_fuzzers.sh build/fuzz 3600 hostfile_fuzz`.
set -euo pipefail

if [[ $# -lt 2 || ! $2 =~ ^[0-9]+$ || $2 -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build_dir=$1
seconds=$2
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
jobs=${FUZZ_BUILD_JOBS:-2}

shopt -s nullglob
targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in "$root"/tests/fuzz/*_fuzz.cc; do
    targets+=("$(basename "$src" .cc)")
  done
fi
if ((${#targets[@]} == 0)); then
  echo "run_fuzzers: no tests/fuzz/*_fuzz.cc found" >&2
  exit 2
fi

# -O1 with line tables only, as libFuzzer's documentation builds: a fifth less to compile than -O2 -g (the
# generated protobuf code of the runtime's rooms is most of it), and stacks still name file and line.
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build_dir" -G Ninja \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DDISTRUN_FUZZ=ON -DDISTRUN_SANITIZE=ON -DDISTRUN_TESTS=ON >/dev/null
ninja -C "$build_dir" -j"$jobs" "${targets[@]}"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/distrun-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
findings_dir="$build_dir/fuzz-findings"
failed=()

for target in "${targets[@]}"; do
  exe=$(find "$build_dir" -type f -name "$target" -perm -u+x -print -quit)
  if [[ -z $exe ]]; then
    echo "run_fuzzers: $target was not built" >&2
    failed+=("$target")
    continue
  fi
  corpus="$scratch/$target/corpus"
  artifacts="$scratch/$target/artifacts"
  mkdir -p "$corpus" "$artifacts"
  seeds="$root/tests/fuzz/corpus/${target%_fuzz}"
  if [[ -d $seeds ]]; then
    cp -R "$seeds"/. "$corpus"/
  fi
  echo "run_fuzzers: $target for ${seconds}s ($(find "$corpus" -type f | wc -l) seeds)"
  status=0
  # A unit slower than 10 s counts as a finding: no input of at most 4 KiB should take that long.
  runs=()
  [[ -n ${FUZZ_RUNS:-} ]] && runs=(-runs="$FUZZ_RUNS")
  start=$EPOCHREALTIME
  "$exe" -max_total_time="$seconds" "${runs[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$scratch/$target/log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$scratch/$target/log" | sed "s/^/  $target /" || true
  # The last status line: coverage (edges), features, the corpus it grew to; and the time it took.
  grep -E '^#[0-9]+' "$scratch/$target/log" | tail -n 1 | sed "s/^/  $target /" || true
  awk -v a="$start" -v b="$EPOCHREALTIME" -v t="$target" 'BEGIN { printf "  %s seconds: %.0f\n", t, b - a }'
  found=("$artifacts"/*)
  if ((status != 0 || ${#found[@]} > 0)); then
    echo "run_fuzzers: $target FAILED (exit $status); last lines of its log:" >&2
    tail -n 40 "$scratch/$target/log" >&2
    mkdir -p "$findings_dir/$target"
    if ((${#found[@]} > 0)); then
      cp "${found[@]}" "$findings_dir/$target/"
      echo "run_fuzzers: reproducers in $findings_dir/$target/" >&2
    fi
    failed+=("$target")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "run_fuzzers: findings in ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzzers: ${#targets[@]} target(s), no findings"
