#!/usr/bin/env bash
# Installs every Debian package distrun needs to build, test and fuzz. Idempotent; run as root.
set -euo pipefail

build_pkgs=(build-essential cmake ninja-build pkg-config
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libgtest-dev libgmock-dev clang-14 libclang-rt-14-dev clang-format dpkg-dev file)
test_pkgs=(slurm-wlm slurm-client munge openmpi-bin libopenmpi-dev mpich
  python3 python3-yaml python3-mpi4py python3-torch iproute2 procps util-linux groff man-db gdb)

missing=()
for p in "${build_pkgs[@]}" "${test_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts munge and slurm services on install where an init system runs; the test lab runs its own.
echo "install-deps: all packages present"
