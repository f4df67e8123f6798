#!/usr/bin/env bash
# Configures and builds one flavour of distrun: release (default), asan (ASan+UBSan) or fuzz (clang-14);
# or `wheel`: the release build's programs for the wheel (cmake/wheel.cmake: for glibc 2.28 and later) packed
# as dist/distrun-VERSION-py3-none-manylinux_2_28_x86_64.whl (scripts/make_wheel.py; pip install dist/*.whl).
#   scripts/build.sh [release|asan|fuzz|wheel] [BUILD_DIR [TARGET...]]
# With TARGETs only those are built (scripts/demo.sh: `distrun`, which brings its sentinel and runtime module,
# and none of the tests or benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
if [[ $flavour == wheel ]]; then
  dir=${2:-build/release}
  "$0" release "$dir"
  exec /usr/bin/python3 scripts/make_wheel.py "$dir" dist
fi
dir=${2:-build/$flavour}
targets=("${@:3}")
jobs=${DISTRUN_BUILD_JOBS:-$(nproc)}
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # No benchmarks under the sanitizers: nothing runs them there (the guard times the release build).
  # -O1 -g1 (line tables and function names: all a sanitizer's stack needs) as the sanitizers' documentation
  # suggests: this tree is compiled cold in every CI run, and -O2 -g made it the run's longest step.
  asan) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTRUN_SANITIZE=ON -DDISTRUN_BENCH=OFF
              -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG") ;;
  fuzz) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTRUN_SANITIZE=ON -DDISTRUN_FUZZ=ON
              -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14) ;;
  *) echo "build.sh: unknown flavour '$flavour'; use release, asan, fuzz or wheel" >&2; exit 2 ;;
esac
# ccache, where installed, makes rebuilds in several build trees cheap; it is optional (and a tree configured
# with it builds on once it is gone).
launcher=$(command -v ccache || true)
args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher")
cmake -S . -B "$dir" -G Ninja "${args[@]}" >/dev/null
ninja -C "$dir" -j "$jobs" "${targets[@]}"
