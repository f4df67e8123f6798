#!/usr/bin/env bash
# Debian 11 (bullseye, glibc 2.31) for the wheel, fetched from Debian's archive (signed, like every package
# here) and kept under /var/cache/distrun, so that building and testing need no network afterwards:
#
#   scripts/bullseye.sh sysroot [DIR]   glibc 2.31's libraries and start files (libc6, libc6-dev unpacked):
#                                       what the wheel's programs are linked against (cmake/wheel.cmake),
#                                       so that no symbol binds to a version newer than 2.31
#                                       (default DIR: $DISTRUN_WHEEL_SYSROOT or /var/cache/distrun/bullseye-sysroot)
#   scripts/bullseye.sh root [DIR]      a minimal bullseye userland with Python 3.9 and venv (debootstrap, as
#                                       root): where tests/integration/older_userland_test.py installs the wheel
#                                       (default DIR: $DISTRUN_BULLSEYE_ROOT or /var/cache/distrun/bullseye-root)
#
# Each is made once (a DIR/.complete marker; delete DIR to make it again). Bullseye's long-term support ended
# in August 2026; when it leaves deb.debian.org for archive.debian.org, this says so and how to point
# DISTRUN_BULLSEYE_MIRROR there.
set -euo pipefail
mirror=${DISTRUN_BULLSEYE_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

gone() {
  echo "bullseye.sh: $1 could not be fetched from $mirror: Debian 11 (bullseye) may have moved to" \
    "archive.debian.org; run again with DISTRUN_BULLSEYE_MIRROR=http://archive.debian.org/debian" \
    "(or a mirror of your own that holds bullseye)" >&2
  exit 1
}

# Absolute links resolve against the host's / when the linker follows them inside a sysroot; relative ones
# stay inside it.
relative_links() {
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$1$target")" "$link"
  done < <(find "$1" -type l -lname '/*' -print0)
}

make_sysroot() {
  local dir=$1 work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  chmod 755 "$work"  # apt downloads as its own user
  mkdir -p "$work/lists/partial" "$work/archives/partial"
  # Bullseye's own indexes in a private apt state: the machine's sources and state stay as they are.
  cat >"$work/sources.list" <<EOF
deb [signed-by=$keyring] $mirror bullseye main
deb [signed-by=$keyring] $mirror bullseye-updates main
EOF
  local apt=(apt-get -qq -o APT::Sandbox::User=root -o "Dir::Etc::SourceList=$work/sources.list"
    -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Status=/dev/null -o "Dir::State::Lists=$work/lists"
    -o "Dir::Cache::Archives=$work/archives")
  "${apt[@]}" update >/dev/null 2>&1 || gone "the bullseye package index"
  (cd "$work" && "${apt[@]}" download libc6 libc6-dev >/dev/null 2>&1) || gone "libc6 and libc6-dev"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  for deb in "$work"/libc6_*.deb "$work"/libc6-dev_*.deb; do dpkg-deb -x "$deb" "$dir.partial"; done
  relative_links "$dir.partial"
  basename -a "$work"/*.deb >"$dir.partial/.complete"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
}

make_root() {
  local dir=$1
  rm -rf "$dir.partial"
  # --variant=minbase: essential packages and apt; python3-venv brings Python 3.9 and pip 20.3 (as wheels).
  if ! debootstrap --variant=minbase --include=python3,python3-venv bullseye "$dir.partial" "$mirror" \
    >"$dir.log" 2>&1; then
    grep -q "Failed getting release file\|Couldn't download" "$dir.log" && gone "the bullseye release"
    echo "bullseye.sh: debootstrap failed; its log: $dir.log" >&2
    exit 1
  fi
  chroot "$dir.partial" dpkg-query -W -f='${Package} ${Version}\n' libc6 python3 >"$dir.partial/.complete"
  rm -rf "$dir" "$dir.log"
  mv "$dir.partial" "$dir"
}

what=${1:-}
case "$what" in
  sysroot) dir=${2:-${DISTRUN_WHEEL_SYSROOT:-/var/cache/distrun/bullseye-sysroot}} ;;
  root) dir=${2:-${DISTRUN_BULLSEYE_ROOT:-/var/cache/distrun/bullseye-root}} ;;
  *) echo "bullseye.sh: say what to make: sysroot or root" >&2; exit 2 ;;
esac
[[ -f $dir/.complete ]] && exit 0
mkdir -p "$(dirname "$dir")"
echo "bullseye.sh: making the bullseye $what in $dir"
"make_$what" "$dir"
