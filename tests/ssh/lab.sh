#!/usr/bin/env bash
# Hosts reachable only over ssh, on one machine, for the tests of `distrun -H host1,host2 -- cmd`:
#   lab.sh up          the login host "sshlogin" and host1..hostN, each a network namespace on a private
#                      bridge (10.98.0.0/24) with its own hostname, /etc/hosts, empty resolv.conf, /dev/shm,
#                      and a real OpenSSH sshd on port 22 of its address; plus hosts that fail (below). Fresh
#                      keys every time. Idempotent: a lab that is up stays as it is.
#   lab.sh down        stops every process of the lab by recorded PID (and whatever else still runs in its
#                      namespaces), removes veths, namespaces, bridge and state. Safe to run at any time.
#   lab.sh status      exit 0: the lab is up: every namespace, the bridge and each sshd (alive, listening)
#                      are there and hostsilent drops port 22; prints one line per host.
#                      exit 3: nothing of the lab is left: no state directory, namespace, bridge or veth,
#                      no process in a lab namespace, no sshd with a lab config anywhere (what `down` leaves).
#                      exit 1: anything in between (a part missing or dead); says what, on stderr.
#   lab.sh exec CMD    runs CMD on the login host sshlogin (its network, hostname, /etc/hosts, ssh_config):
#                      `lab.sh exec ssh host1 hostname`.
#   lab.sh env         prints `export` lines for the lab's settings and its ssh client config.
#   lab.sh cut HOST    takes HOST off the network: every packet it sends or receives is dropped (nft in its
#                      namespace; ARP still answers), so TCP to and from it stalls without a reset.
#   lab.sh restore HOST    undoes cut.
#
# Hosts (every one in the /etc/hosts of every lab host):
#   sshlogin 10.98.0.1         the login host, where a user types the launch command (runs an sshd too)
#   host1..hostN 10.98.0.11..  the hosts a job runs on
#   hostclosed 10.98.0.200     up, no sshd: "Connection refused"
#   hostsilent 10.98.0.201     up, drops TCP to port 22: ssh's connect times out
#   hostnokey 10.98.0.202      an sshd that does not accept the lab's client key: "Permission denied (publickey)"
#   hostbadkey 10.98.0.203     an sshd whose host key is not the one known_hosts lists: "Host key verification failed"
#   hostnowhere                listed nowhere: the name does not resolve (resolv.conf is empty)
#
# ssh from any lab host: `ssh -F $DISTRUN_SSH_LAB_DIR/ssh/config HOST CMD`, or plain `ssh HOST CMD`: each
# lab host sees the lab's client config as its /etc/ssh/ssh_config. The hosts share this machine's file
# system (same binaries at the same paths) and process table.
# Settings (environment): DISTRUN_SSH_LAB_DIR (default /run/distrun-sshlab), DISTRUN_SSH_LAB_HOSTS (3, at
# most 100). Run as root. Nothing is written under /etc: every host's /etc/hosts, /etc/resolv.conf and
# /etc/ssh/ssh_config are bind mounts inside its own mount namespace. Beside the Slurm lab
# (tests/cluster/lab.sh: drlab0, 10.99.0.0/24, distrun-lab-*), which may be up at the same time. What it
# shares with that lab is in tests/lab_kit/lab_common.sh.
set -euo pipefail

LAB=${DISTRUN_SSH_LAB_DIR:-/run/distrun-sshlab}
NHOSTS=${DISTRUN_SSH_LAB_HOSTS:-3}
BRIDGE=drssh0
NS_PREFIX=distrun-ssh-
# Interface names are limited to 15 characters: drssh-login, drssh-h16, drssh-badkey.
VETH_PREFIX=drssh-
SUBNET=10.98.0
LOGIN=sshlogin
SSHD=/usr/sbin/sshd  # sshd re-executes itself for each connection: an absolute path
CUT_TABLE=distrun_ssh_cut
SILENT_TABLE=distrun_ssh_silent
BASE_PATH=/usr/sbin:/usr/bin:/sbin:/bin

LAB_LOG_NAME=sshlab
LAB_SCRIPT=tests/ssh/lab.sh
LAB_BINDS=("$LAB/etc/hosts" /etc/hosts "$LAB/etc/resolv.conf" /etc/resolv.conf "$LAB/ssh/config" /etc/ssh/ssh_config)
LOGIN_PID=$LOGIN
LAB_UP_SECONDS=20
LAB_UP_HINT="ssh -F $LAB/ssh/config HOST"
LAB_VERBS=(status env exec cut restore)
LAB_USAGE="up|down|status|env|exec CMD...|cut HOST|restore HOST"
# shellcheck source=SCRIPTDIR/../lab_kit/lab_common.sh
source "$(dirname "$0")/../lab_kit/lab_common.sh"

if ! [[ $NHOSTS =~ ^[0-9]+$ ]] || ((NHOSTS < 1 || NHOSTS > 100)); then
  die "DISTRUN_SSH_LAB_HOSTS must be 1..100, not '$NHOSTS'"
fi

job_hosts() { for ((i = 1; i <= NHOSTS; i++)); do echo "host$i"; done; }
special_hosts() { echo hostclosed hostsilent hostnokey hostbadkey; }
hosts() { echo "$LOGIN"; job_hosts; special_hosts; }
# The hosts that run an sshd.
sshd_hosts() { echo "$LOGIN"; job_hosts; echo hostnokey hostbadkey; }
ip_of() {
  case $1 in
    "$LOGIN") echo "$SUBNET.1" ;;
    hostclosed) echo "$SUBNET.200" ;;
    hostsilent) echo "$SUBNET.201" ;;
    hostnokey) echo "$SUBNET.202" ;;
    hostbadkey) echo "$SUBNET.203" ;;
    host[0-9]*) echo "$SUBNET.$((10 + ${1#host}))" ;;
    *) return 1 ;;
  esac
}
veth_of() {
  case $1 in
    "$LOGIN") echo "${VETH_PREFIX}login" ;;
    host[0-9]*) echo "${VETH_PREFIX}h${1#host}" ;;
    *) echo "$VETH_PREFIX${1#host}" ;;
  esac
}
ns_of() { echo "$NS_PREFIX$1"; }
hostname_of() { echo "$1"; }
is_host() { local h; for h in $(hosts); do [[ $h == "$1" ]] && return 0; done; return 1; }

keygen() { ssh-keygen -q -t ed25519 -N '' -C "$2" -f "$1"; }

write_config() {
  mkdir -p "$LAB"/{etc,pids,ssh,jobs}
  echo "$NHOSTS" >"$LAB/nhosts"
  {
    echo "127.0.0.1 localhost"
    local host
    for host in $(hosts); do echo "$(ip_of "$host") $host"; done
  } >"$LAB/etc/hosts"
  # An empty resolv.conf: a name not in the hosts file (hostnowhere) fails at once on the host's own
  # loopback instead of reaching any real DNS server.
  : >"$LAB/etc/resolv.conf"

  keygen "$LAB/ssh/id_ed25519" "distrun-ssh-lab client"
  cp "$LAB/ssh/id_ed25519.pub" "$LAB/ssh/authorized_keys"
  local host dir listed
  : >"$LAB/ssh/known_hosts"
  for host in $(sshd_hosts); do
    dir=$LAB/hosts/$host
    mkdir -p "$dir"
    keygen "$dir/ssh_host_ed25519_key" "distrun-ssh-lab $host"
    listed=$dir/ssh_host_ed25519_key.pub
    if [[ $host == hostbadkey ]]; then
      # known_hosts lists a key that this sshd never serves.
      keygen "$dir/listed_host_key" "distrun-ssh-lab $host (listed, not served)"
      listed=$dir/listed_host_key.pub
    fi
    echo "$host,$(ip_of "$host") $(cut -d' ' -f1,2 "$listed")" >>"$LAB/ssh/known_hosts"
    local authorized=$LAB/ssh/authorized_keys
    if [[ $host == hostnokey ]]; then
      authorized=$dir/authorized_keys
      : >"$authorized"
    fi
    cat >"$dir/sshd_config" <<EOF
# Generated by tests/ssh/lab.sh for lab host $host; every path lives under $LAB.
ListenAddress $(ip_of "$host")
Port 22
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $authorized
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
# The lab's files are under /run, which sshd's ownership checks would refuse.
StrictModes no
X11Forwarding no
PrintMotd no
PrintLastLog no
Subsystem sftp internal-sftp
# MaxStartups, MaxSessions, LoginGraceTime and ClientAlive* keep their defaults; AcceptEnv names nothing.
EOF
  done

  cat >"$LAB/ssh/config" <<EOF
# Generated by tests/ssh/lab.sh: \`ssh -F $LAB/ssh/config HOST\` from any lab host; each lab host also
# sees this file as its /etc/ssh/ssh_config.
Host *
  User root
  IdentityFile $LAB/ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $LAB/ssh/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  LogLevel ERROR
EOF
}

setup_network() {
  make_network
  # hostsilent answers ARP, but drops what comes to its port 22: a connect there times out.
  nsenter --net="/run/netns/$(ns_of hostsilent)" nft -f - <<EOF
table inet $SILENT_TABLE {
  chain input { type filter hook input priority 0; tcp dport 22 drop; }
}
EOF
}

start_daemons() {
  # sshd's privilege separation directory (Debian's own sshd makes it when it starts); removed at down when
  # the lab made it.
  if [[ ! -d /run/sshd ]]; then
    install -d -m 0755 /run/sshd
    : >"$LAB/made-run-sshd"
  fi
  local host dir
  for host in $(sshd_hosts); do
    dir=$LAB/hosts/$host
    # A clean environment: nothing of the caller's reaches sshd (whose sessions build their own anyway).
    exec_on_host "$host" env -i PATH="$BASE_PATH" "$SSHD" -D -f "$dir/sshd_config" -E "$dir/sshd.log" \
      </dev/null >>"$dir/sshd.out" 2>&1 9>&- &
    echo $! >"$LAB/pids/$host.pid"
  done
}

# Whether the process $1 has a listening TCP socket on $2:22 (/proc/PID/net/tcp is its namespace's table).
listening() {
  local a b c d hex
  IFS=. read -r a b c d <<<"$2"
  printf -v hex '%02X%02X%02X%02X:0016' "$d" "$c" "$b" "$a"
  grep -q "^ *[0-9]*: $hex 00000000:0000 0A " "/proc/$1/net/tcp" 2>/dev/null
}

# Every sshd alive and listening; prints what is not, one line each.
sshd_problems() {
  local host pid
  for host in $(sshd_hosts); do
    pid=$(recorded_pid "$host")
    if ! pid_alive "$pid"; then
      echo "$host: sshd ${pid:+(PID $pid) }is not running"
    elif ! listening "$pid" "$(ip_of "$host")"; then
      echo "$host: sshd (PID $pid) is not listening on $(ip_of "$host"):22"
    fi
  done
}
sshds_ready() { [[ -z $(sshd_problems) ]]; }

nft_tables() { nsenter --net="/run/netns/$(ns_of "$1")" nft list tables 2>/dev/null; }

# Every part of a lab that is up; prints what is missing, one line each.
up_problems() {
  [[ -d $LAB ]] || { echo "no state directory $LAB"; return; }
  local made
  made=$(cat "$LAB/nhosts" 2>/dev/null || true)
  [[ $made == "$NHOSTS" ]] || echo "made with ${made:-an unknown number of} hosts, not $NHOSTS (DISTRUN_SSH_LAB_HOSTS)"
  ip link show "$BRIDGE" >/dev/null 2>&1 || echo "no bridge $BRIDGE"
  local host
  for host in $(hosts); do
    [[ -e /run/netns/$(ns_of "$host") ]] || echo "$host: no network namespace $(ns_of "$host")"
    ip link show "$(veth_of "$host")" >/dev/null 2>&1 || echo "$host: no veth $(veth_of "$host")"
  done
  sshd_problems
  if [[ -e /run/netns/$(ns_of hostsilent) ]] && ! nft_tables hostsilent | grep -q " $SILENT_TABLE\$"; then
    echo "hostsilent: no nft table $SILENT_TABLE"
  fi
}
lab_ready() { [[ -z $(up_problems) ]]; }
daemons_ready() { sshds_ready; }
before_up() { command -v "$SSHD" >/dev/null || die "no $SSHD: run scripts/install-deps.sh (openssh-server)"; }
up_summary() { echo "sshlogin + $NHOSTS hosts + hostclosed, hostsilent, hostnokey, hostbadkey"; }
say_why_not_ready() {
  sshd_problems >&2
  local host
  for host in $(sshd_hosts); do tail -5 "$LAB/hosts/$host/sshd.log" "$LAB/hosts/$host/sshd.out" >&2 || true; done
}

# sshds of the lab wherever they run: processes whose command line names a lab sshd_config (pgrep leaves
# itself out).
lab_sshd_processes() {
  local pattern
  pattern=$(printf '%s' "$LAB/hosts/" | sed 's/[][\.*^$+?(){}|]/\\&/g')
  pgrep -f -- "${pattern}[^ ]*/sshd_config" || true
}

# Any sshd at all on this machine, the lab's or not (zombies aside): /run/sshd stays while one runs.
any_sshd_alive() {
  local pid
  for pid in $(pgrep -x sshd); do pid_alive "$pid" && return 0; done
  return 1
}

# Whatever of the lab exists, one line each; nothing when the lab is completely down.
leftovers() {
  [[ -e $LAB ]] && echo "state directory $LAB"
  network_leftovers
  local x
  for x in $({ lab_pids; lab_sshd_processes; } | sort -nu); do echo "process $(ps -o pid=,args= -p "$x" 2>/dev/null || echo "$x")"; done
  return 0
}

cmd_down() {
  # SIGKILL: the sshds, and whatever else the namespaces still hold (sessions, the tests' clients).
  kill_lab_processes
  if [[ -e $LAB/made-run-sshd ]] && ! any_sshd_alive; then rmdir /run/sshd 2>/dev/null || true; fi
  remove_lab
}

cmd_status() {
  local problems left
  problems=$(up_problems)
  if [[ -z $problems ]]; then
    local host state tables
    for host in $(hosts); do
      tables=$(nft_tables "$host")
      case $host in
        hostclosed) state="no sshd: refuses port 22" ;;
        hostsilent) state="no sshd: drops port 22" ;;
        *) state="sshd PID $(recorded_pid "$host")" ;;
      esac
      [[ $tables == *" $CUT_TABLE"* ]] && state+=", cut off"
      printf '%-12s %-12s %s\n' "$host" "$(ip_of "$host")" "$state"
    done
    return 0
  fi
  left=$(leftovers)
  if [[ -z $left ]]; then
    log "down: nothing of the lab is left"
    return 3
  fi
  log "not up:"
  echo "  ${problems//$'\n'/$'\n'  }" >&2
  log "what there is of it:"
  echo "  ${left//$'\n'/$'\n'  }" >&2
  return 1
}

cmd_cut() {
  local host=${1:-}
  is_host "$host" || die "cut needs a lab host: $(hosts | tr '\n' ' ')"
  [[ -e /run/netns/$(ns_of "$host") ]] || die "the lab is not up"
  nft_tables "$host" | grep -q " $CUT_TABLE\$" && return 0
  # Loopback stays: the host itself still works; ARP is not filtered (inet tables see IP only), so the
  # others' packets reach it and vanish, and nothing answers with a reset or an ICMP error.
  nsenter --net="/run/netns/$(ns_of "$host")" nft -f - <<EOF
table inet $CUT_TABLE {
  chain input { type filter hook input priority -10; iifname "lo" accept; drop; }
  chain output { type filter hook output priority -10; oifname "lo" accept; drop; }
}
EOF
}

cmd_restore() {
  local host=${1:-}
  is_host "$host" || die "restore needs a lab host: $(hosts | tr '\n' ' ')"
  [[ -e /run/netns/$(ns_of "$host") ]] || die "the lab is not up"
  nft_tables "$host" | grep -q " $CUT_TABLE\$" || return 0
  nsenter --net="/run/netns/$(ns_of "$host")" nft delete table inet "$CUT_TABLE"
}

cmd_env() { echo "export DISTRUN_SSH_LAB_DIR=$LAB DISTRUN_SSH_LAB_HOSTS=$NHOSTS DISTRUN_SSH_CONFIG=$LAB/ssh/config"; }

lab_main "$@"
