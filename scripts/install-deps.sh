#!/usr/bin/env bash
# Installs every Debian package distrun needs to build, test and fuzz. Idempotent; run as root.
#   scripts/install-deps.sh           everything: the build, the tests' labs, the wheel's Debian 11 parts
#   scripts/install-deps.sh --demo    what the build and scripts/demo.sh's main job need, nothing more
set -euo pipefail
demo=
if [[ ${1:-} == --demo ]]; then
  demo=yes
elif [[ $# -gt 0 ]]; then
  echo "install-deps: unknown argument '$1'; use --demo or nothing" >&2
  exit 2
fi

# The release build (GoogleTest: its configure step looks for it).
build_pkgs=(build-essential cmake ninja-build pkg-config
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libgtest-dev libgmock-dev)
# The fuzz build (clang-14, libFuzzer), the format check, the .deb and the wheel's checks.
tool_pkgs=(clang-14 libclang-rt-14-dev clang-format dpkg-dev file)
test_pkgs=(slurm-wlm slurm-client munge openmpi-bin libopenmpi-dev mpich
  python3 python3-yaml python3-mpi4py python3-torch python3-venv python3-pip python3-wheel
  iproute2 nftables procps util-linux groff man-db gdb debootstrap
  openssh-client openssh-server pdsh
  prometheus chromium)

# The main job (scripts/demo.sh): PyTorch's workers.
demo_pkgs=(python3 python3-torch)
wanted=("${build_pkgs[@]}" "${tool_pkgs[@]}" "${test_pkgs[@]}")
[[ -n $demo ]] && wanted=("${build_pkgs[@]}" "${demo_pkgs[@]}")

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian starts a package's services on install (munged, slurmd, prometheus on port 9090, and sshd on port
  # 22 of this machine);
  # the test labs run their own, in their own network namespaces. A policy-rc.d that denies every start
  # while apt runs, unless the machine has one already (Docker's images do), removed afterwards.
  made_policy=
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    made_policy=yes
    printf '#!/bin/sh\n# Made by distrun scripts/install-deps.sh for one apt-get install; removed after it.\nexit 101\n' \
      >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # Nor at boot: the system's sshd stays off where this script installs it (Debian's init script and
  # ssh.service both honour this file; delete it to run a system sshd). A machine that had openssh-server
  # before keeps its sshd as it was.
  if [[ " ${missing[*]} " == *" openssh-server "* && ! -e /etc/ssh/sshd_not_to_be_run ]]; then
    mkdir -p /etc/ssh
    echo "distrun scripts/install-deps.sh: the ssh test lab runs its own sshd (tests/ssh/lab.sh)" \
      >/etc/ssh/sshd_not_to_be_run
    echo "install-deps: the system sshd stays off (/etc/ssh/sshd_not_to_be_run)"
  fi
  sshd_pid_file_before=
  if [[ -e /run/sshd.pid ]]; then sshd_pid_file_before=yes; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ -n $made_policy ]]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
  # Should an sshd have started all the same (its PID file appeared during the install), it is stopped.
  if [[ -z $sshd_pid_file_before && -s /run/sshd.pid ]]; then
    pid=$(cat /run/sshd.pid)
    if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == /usr/sbin/sshd ]]; then
      echo "install-deps: stopping the system sshd the install started (PID $pid)"
      kill "$pid"
    fi
  fi
fi
echo "install-deps: all packages present"
# The demo builds and runs distrun; the wheel's parts below are for the wheel and its tests.
[[ -n $demo ]] && exit 0

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
