# shellcheck shell=bash
# What tests/cluster/lab.sh and tests/ssh/lab.sh share: a lab of virtual hosts on one machine, each a network
# namespace on a private bridge, whose processes are recorded by PID under the lab's state directory.
# Sourced, not run. Before it, the lab sets:
#   LAB            its state directory (PIDs in $LAB/pids/NAME.pid)
#   LAB_LOG_NAME   the prefix of its messages ("lab", "sshlab")
#   LAB_SCRIPT     how a user names it in messages (tests/cluster/lab.sh)
#   BRIDGE, NS_PREFIX, VETH_PREFIX   its bridge, and what its namespaces' and veths' names start with
#   LAB_BINDS      FILE TARGET pairs that every host sees bind-mounted (its /etc/hosts, ...)
#   LOGIN_PID      the recorded name of the process whose namespaces are the login host's (`exec`)
#   LAB_VERBS      the verbs besides up and down, each a function cmd_VERB; LAB_USAGE, the usage line
# and defines hosts, ns_of, veth_of, ip_of, hostname_of, write_config, setup_network, start_daemons, lab_ready (everything
# up), daemons_ready (what `up` waits for), leftovers (whatever of it exists, one line each),
# say_why_not_ready, up_summary, before_up, cmd_down.

log() { echo "$LAB_LOG_NAME: $*" >&2; }
die() { log "error: $*"; exit 1; }

# span A [B]: seconds from A to B (default: now), two decimals; A and B are $EPOCHREALTIME values.
span() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.2f", b - a }'; }

# A zombie has no namespaces and holds nothing: it counts as gone.
pid_alive() {
  local stat
  [[ -n ${1:-} ]] && stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}
kill_pid() { if pid_alive "${1:-}"; then kill -KILL "$1" 2>/dev/null || true; fi; }
recorded_pid() { cat "$LAB/pids/$1.pid" 2>/dev/null || true; }
recorded_alive() {
  local f
  for f in "$LAB"/pids/*.pid; do
    [[ -e $f ]] || continue
    if pid_alive "$(cat "$f")"; then cat "$f"; fi
  done
}

# wait_for SECONDS CMD...: polls CMD every 20 ms until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.02
  done
}

# Becomes (exec) a command as if on virtual host $1: its network namespace, plus a fresh UTS and mount
# namespace in which its hostname, the files of LAB_BINDS and /dev/shm are its own. nsenter + unshare rather
# than `ip netns exec`, which remounts /sys (and leaves slurmd without /sys/fs/cgroup). Nothing here forks,
# so `exec_on_host ... &` makes $! the PID of the final command.
exec_on_host() {
  local host=$1; shift
  # shellcheck disable=SC2016  # the inner script expands its own arguments
  exec setsid nsenter --net="/run/netns/$(ns_of "$host")" \
    unshare --uts --mount --propagation private -- /bin/sh -c '
      set -e
      name=$1
      shift
      while [ "$1" != -- ]; do mount --bind "$1" "$2"; shift 2; done
      shift
      mount -t tmpfs -o mode=1777,size=256m tmpfs /dev/shm
      hostname "$name"
      exec "$@"' sh "$(hostname_of "$host")" "${LAB_BINDS[@]}" -- "$@"
}

# Runs a command in the namespaces (network, hostname, mounts) of the recorded process $1.
in_recorded() { local pid; pid=$(recorded_pid "$1"); shift; nsenter --target "$pid" --net --uts --mount -- "$@"; }

# The bridge, and one namespace per host joined to it by a veth pair, the host's end named eth0: each lab's
# setup_network.
make_network() {
  local host ns
  {
    echo "link add $BRIDGE type bridge"
    echo "link set $BRIDGE up"
    for host in $(hosts); do
      ns=$(ns_of "$host")
      echo "netns add $ns"
      echo "link add $(veth_of "$host") type veth peer name eth0 netns $ns"
      echo "link set $(veth_of "$host") master $BRIDGE up"
    done
  } | ip -batch -
  for host in $(hosts); do
    printf '%s\n' "link set lo up" "addr add $(ip_of "$host")/24 dev eth0" "link set eth0 up" |
      ip -n "$(ns_of "$host")" -batch -
  done
}

lab_namespaces() { ip netns list | awk -v p="$NS_PREFIX" 'index($1, p) == 1 {print $1}'; }
lab_veths() { ip -o link show | awk -F': ' -v p="$VETH_PREFIX" 'index($2, p) == 1 {sub(/@.*/, "", $2); print $2}'; }

# PIDs of every live process in the lab's network namespaces (only the lab's scripts and the tests put
# processes there), found in one pass over /proc.
lab_pids() {
  local inodes
  inodes=$(for ns in $(lab_namespaces); do stat -L -c %i "/run/netns/$ns"; done)
  [[ -n $inodes ]] || return 0
  stat -L -c '%i %n' /proc/[0-9]*/ns/net 2>/dev/null |
    awk 'NR == FNR {want[$1] = 1; next} ($1 in want) {split($2, p, "/"); print p[3]}' <(echo "$inodes") - |
    while read -r pid; do if pid_alive "$pid"; then echo "$pid"; fi; done
}
nothing_left_running() { [[ -z $(lab_pids; recorded_alive) ]]; }

# SIGKILL: the recorded daemons, and whatever else the namespaces still hold. The lab's state is thrown away,
# so nothing needs an orderly shutdown (slurmd, slurmctld and munged each take about 2 s to act on SIGTERM).
kill_lab_processes() {
  local f left
  for f in "$LAB"/pids/*.pid; do
    [[ -e $f ]] && kill_pid "$(cat "$f")"
  done
  for left in $(lab_pids); do kill_pid "$left"; done
  wait_for 10 nothing_left_running || die "processes survived SIGKILL: $(lab_pids) $(recorded_alive)"
}

# Deleting a veth removes both its ends at once; a namespace's own interfaces go only when the kernel gets
# round to cleaning the namespace up, later.
remove_network() {
  local x
  {
    for x in $(lab_veths); do echo "link del $x"; done
    for x in $(lab_namespaces); do echo "netns del $x"; done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then echo "link del $BRIDGE"; fi
  } | ip -force -batch - 2>/dev/null || true  # a pair whose other end went first; network_leftovers checks
}

# Whatever of the lab's network exists, one line each.
network_leftovers() {
  ip link show "$BRIDGE" >/dev/null 2>&1 && echo "bridge $BRIDGE"
  local x
  for x in $(lab_namespaces); do echo "network namespace $x"; done
  for x in $(lab_veths); do echo "veth $x"; done
  return 0
}

# What is left once the processes are gone: the network and the state directory. Then nothing the lab's
# leftovers name may exist.
remove_lab() {
  remove_network
  rm -rf "$LAB"
  local left
  left=$(leftovers)
  [[ -z $left ]] || die "left after teardown: $(tr '\n' ';' <<<"$left")"
  log "down"
}

cmd_up() {
  if lab_ready; then log "already up ($(up_summary))"; return 0; fi
  # A half-built or half-dead lab is taken down completely first.
  if [[ -n $(leftovers) ]]; then cmd_down; fi
  local start=$EPOCHREALTIME
  before_up
  # Whatever fails from here on, nothing of a half-built lab stays behind.
  trap 'log "up failed; taking the lab down"; cmd_down' EXIT
  write_config
  setup_network
  start_daemons
  if ! wait_for "$LAB_UP_SECONDS" daemons_ready; then
    say_why_not_ready
    die "lab did not come up"
  fi
  trap - EXIT
  log "up: $(up_summary) in $(span "$start")s; $LAB_UP_HINT"
}

cmd_exec() {
  [[ ${1:-} == -- ]] && shift
  (($#)) || die "exec needs a command"
  pid_alive "$(recorded_pid "$LOGIN_PID")" || die "the lab is not up ($LAB_SCRIPT up)"
  exec nsenter --target "$(recorded_pid "$LOGIN_PID")" --net --uts --mount -- "$@"
}

# lab_main "$@": runs one verb. up and down hold a lock on the lab's script, so that one builds or removes
# the lab at a time and nothing is left behind; the daemons close it, and the other verbs let it go.
lab_main() {
  [[ $(id -u) -eq 0 ]] || die "run as root (namespaces, bridge, daemons)"
  exec 9<"$0"
  local verb=${1:-}
  case $verb in
    up) flock 9; cmd_up ;;
    down) flock 9; cmd_down ;;
    *)
      if [[ " ${LAB_VERBS[*]} " != *" $verb "* ]]; then echo "usage: $0 $LAB_USAGE" >&2; exit 2; fi
      shift
      exec 9>&-
      "cmd_$verb" "$@"
      ;;
  esac
}
