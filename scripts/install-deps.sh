#!/usr/bin/env bash
# Installs every Debian package distrun needs to build, test and fuzz. Idempotent; run as root.
set -euo pipefail

build_pkgs=(build-essential cmake ninja-build pkg-config
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libgtest-dev libgmock-dev clang-14 libclang-rt-14-dev clang-format dpkg-dev file)
test_pkgs=(slurm-wlm slurm-client munge openmpi-bin libopenmpi-dev mpich
  python3 python3-yaml python3-mpi4py python3-torch python3-venv python3-pip python3-wheel
  iproute2 nftables procps util-linux groff man-db gdb debootstrap)

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

# The Python wheel's client library (cmake/client_library.cmake) links Debian's static gRPC, protobuf and
# abseil into a shared library; a few of their archives' objects are built for executables only, so the
# build compiles those files again, position-independent, from the Debian source packages of the installed
# versions, fetched here (signed by the archive, like the binaries) into DISTRUN_DEBIAN_SOURCES.
sources=${DISTRUN_DEBIAN_SOURCES:-/var/cache/distrun/debian-sources}
fetch=()
for dev in libabsl-dev libprotobuf-dev; do
  read -r name version < <(dpkg-query -W -f='${source:Package} ${source:Version}\n' "$dev")
  [[ -d $sources/$name-$version ]] || fetch+=("$name=$version")
done
if ((${#fetch[@]})); then
  echo "install-deps: fetching Debian sources of ${fetch[*]} into $sources"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work"  # apt downloads as its own user
  mkdir -p "$work/parts" "$work/lists/partial" "$work/archives/partial" "$sources"
  # The machine's own archives, as source archives; apt's state and configuration stay as they are.
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -e $f ]] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$work/parts/$(basename "$f")"
  done
  if [[ -s /etc/apt/sources.list ]]; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$work/parts/sources.list.list"
  fi
  apt=(apt-get -qq -o APT::Sandbox::User=root -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
       -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives")
  "${apt[@]}" update
  for spec in "${fetch[@]}"; do
    (cd "$work" && "${apt[@]}" source --download-only "$spec" >/dev/null)
    dsc=$(ls "$work/${spec%%=*}_${spec#*=}.dsc" 2>/dev/null || ls "$work/${spec%%=*}_${spec#*=*:}.dsc")
    # apt checked every file against the archive's signed index; the maintainer's key is not needed.
    dpkg-source --no-check -x "$dsc" "$sources/${spec%%=*}-${spec#*=}" >/dev/null
    rm -f "$sources"/*.orig.tar.* "$sources"/*.debian.tar.*
  done
fi

# The wheel's programs are linked against Debian 11's glibc 2.31 (cmake/wheel.cmake), and its tests install it
# in a Debian 11 userland (tests/integration/older_userland_test.py): both fetched once from Debian's archive.
"$(dirname "$0")/bullseye.sh" sysroot
"$(dirname "$0")/bullseye.sh" root
