#!/usr/bin/env bash
# distrun on a machine with NVIDIA GPUs: what --detect sees (checked against nvidia-smi and sysfs), the
# /proc fallback when libcuda.so.1 cannot be loaded, --cpu-bind gpu, `distrun check`, and PyTorch NCCL and
# JAX workers fed only from distrun's environment. Each step's output is saved as OUT_DIR/NAME.txt and
# echoed; the last lines list every step's exit status. Recorded results: bench/GPU_RESULTS.md.
#
#   bench/gpu_checks.sh [BUILD_DIR (build/release)] [OUT_DIR (gpu-results)] [PYTHON (python3)]
#
# GPU_CHECKS=NAME,NAME... runs only those steps (each device lease is short). inprocess-nccl: recovering in
# place with NCCL (bench/gpu_inprocess_nccl.py). The torch-store-* steps:
# PyTorch 2.x on distrun's store (NCCL, the Flight Recorder's buffer, and the TorchStore integration tests
# with that torch's gloo), and `distrun-bench torch-store` against that release's own servers on this
# machine's cores.
#
# The build may come from another machine (distrun loads only libc and libm); distrun-check-worker needs
# libcudart.so.13 and libnccl.so.2, which are looked for in the toolkit and in the Python packages of
# PYTHON (nvidia-nccl, nvidia-cuda-runtime) when the loader does not find them.
set -u
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build/release}")
out=${2:-gpu-results}
python=${3:-python3}
distrun=$build/distrun
export distrun python
mkdir -p "$out"
summary=()

only=",${GPU_CHECKS:-},"
step() {  # step NAME COMMAND...: runs it (at most STEP_TIMEOUT, 180 s), saves and echoes its output, records its exit status
  local name=$1 rc
  shift
  [ "$only" = ",," ] || [[ $only == *",$name,"* ]] || return 0
  echo "== $name: $*"
  timeout -k 5 "${STEP_TIMEOUT:-180}" bash -c '"$@"' step "$@" >"$out/$name.txt" 2>&1
  rc=$?
  cat "$out/$name.txt"
  echo "== $name: exit $rc"
  summary+=("$name: exit $rc")
}

library_dirs() {  # directories that hold libnccl.so.2 or libcudart.so.13 where the loader may not look
  "$python" - <<'PY' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for pattern in ("nvidia/nccl/lib", "nvidia/cuda_runtime/lib", "nvidia/cu13/lib"):
    for root in roots:
        for d in glob.glob(os.path.join(root, pattern)):
            print(d)
PY
  ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib 2>/dev/null
}
if ldd "$build/distrun-check-worker" 2>/dev/null | grep -q "not found"; then
  export LD_LIBRARY_PATH="$(library_dirs | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step machine sh -c 'uname -a; nproc; nvidia-smi -L; nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version --format=csv'
step torch-sees "$python" -c "import torch; p = torch.cuda.get_device_properties(0); print(p.name, p.uuid, torch.cuda.nccl.version())"
step version "$distrun" --version
step detect "$distrun" --detect
step detect-json "$distrun" --detect --format json

# What --detect says must be what the driver says: every UUID and bus id nvidia-smi lists.
compare_with_nvidia_smi() {
  local json smi ok=0
  json=$("$distrun" --detect --format json) || return 1
  smi=$(nvidia-smi --query-gpu=uuid,pci.bus_id --format=csv,noheader) && [ -n "$smi" ] || {
    echo "nvidia-smi lists no GPU"
    return 1
  }
  while IFS=', ' read -r uuid bus; do
    bus=${bus,,}
    bus=${bus#0000}  # nvidia-smi prints an 8-digit domain, 00000000:19:00.0
    if grep -qi "$uuid" <<<"$json" && grep -qi "${bus: -12}" <<<"$json"; then
      echo "found $uuid at $bus"
    else
      echo "MISSING $uuid at $bus"
      ok=1
    fi
  done <<<"$smi"
  return $ok
}
export -f compare_with_nvidia_smi
step detect-matches-nvidia-smi compare_with_nvidia_smi

first_uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
# CUDA_VISIBLE_DEVICES as CUDA reads it: an index, a unique UUID prefix, an index past the last GPU.
step visible-uuid-prefix env CUDA_VISIBLE_DEVICES="${first_uuid:0:12}" "$distrun" --detect
step visible-index env CUDA_VISIBLE_DEVICES=0 "$distrun" --detect
step visible-none env CUDA_VISIBLE_DEVICES=99 "$distrun" --detect

# The fallback when the driver library cannot be loaded: an empty file over libcuda.so.1 in a private
# mount namespace, so only this distrun sees it.
fallback_without_driver() {
  local lib
  lib=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
  [ -n "$lib" ] || { echo "libcuda.so.1 is not in the loader cache"; return 1; }
  unshare -m sh -c "mount --bind /dev/null '$(realpath "$lib")' && '$distrun' --detect -v"
}
export -f fallback_without_driver
step detect-without-driver fallback_without_driver

# --cpu-bind gpu: each worker's allowed CPUs against the GPU's local_cpulist in sysfs.
cpu_bind() {
  local bus
  for bus in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do
    bus=${bus,,}
    bus=${bus#0000}
    echo "sysfs $bus local_cpulist: $(cat /sys/bus/pci/devices/$bus/local_cpulist 2>&1)" \
      "numa_node: $(cat /sys/bus/pci/devices/$bus/numa_node 2>&1)"
  done
  "$distrun" --detect --cpu-bind gpu | grep -i cpu
  "$distrun" --cpu-bind gpu -- sh -c 'grep Cpus_allowed_list /proc/self/status'
}
export -f cpu_bind
step cpu-bind cpu_bind

step check "$distrun" check
step torch-nccl "$distrun" -- "$python" examples/torch_allreduce.py nccl
step jax "$distrun" -- "$python" examples/jax_distributed.py
step jax-local-device-ids "$distrun" --device-binding none -- "$python" examples/jax_distributed.py
# jax.distributed.initialize() with no arguments (distrun's JAX cluster first): two CPU processes locally,
# and per node with a Slurm task's variables set, where JAX's own Slurm detection would make each worker
# "process 0 of 1"; with python -S (no sitecustomize) JAX's Slurm detection reads the task variables distrun
# rewrote for the workers.
slurm_task=(SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_NPROCS=1 SLURM_LOCALID=0
            SLURM_NODEID=0 SLURM_STEP_NUM_NODES=1 SLURM_STEP_NUM_TASKS=1 SLURM_STEP_NODELIST=localhost
            SLURM_JOB_NODELIST=localhost)
step jax-no-args-cpu "$distrun" --nproc-per-node 2 -- "$python" bench/gpu_jax_world.py cpu
step jax-no-args-slurm-per-node env "${slurm_task[@]}" "$distrun" --cluster-detection-method local \
  --nproc-per-node 2 -- "$python" bench/gpu_jax_world.py cpu
# Without distrun's sitecustomize: python -S, then only the venv's and site-packages directories added (their
# .pth files read, no sitecustomize run), so JAX is importable but only its own cluster detection runs.
step jax-no-args-slurm-per-node-no-site env "${slurm_task[@]}" "$distrun" --cluster-detection-method local \
  --nproc-per-node 2 -- "$python" -S -c "import runpy, site, sys; site.addsitepackages(site.venv(set())); sys.argv = ['w', 'cpu']; runpy.run_path('bench/gpu_jax_world.py', run_name='__main__')"
step jax-no-args-gpu "$distrun" -- "$python" bench/gpu_jax_world.py
step jax-no-args-keras env KERAS_BACKEND=jax "$distrun" --nproc-per-node 2 -- "$python" -c \
  "import jax; jax.config.update('jax_platforms', 'cpu'); jax.config.update('jax_cpu_collectives_implementation', 'gloo'); import keras; keras.distribution.initialize(); print('keras', jax.process_index(), jax.process_count())"

# PyTorch 2.x on distrun's store (--torch-store distrun, the default): NCCL initialised through it, no
# worker listening on MASTER_PORT, and the Flight Recorder recording with the buffer distrun sets.
torch_store_nccl() {
  local report
  report=$(STORE_WORKER_BACKEND=nccl "$distrun" -- "$python" tests/integration/torch_store_worker.py 2>&1) ||
    { echo "$report"; return 1; }
  echo "$report"
  grep -q "sum=1 owner=other" <<<"$report" && grep -q "agent_store=True" <<<"$report" &&
    grep -qE "coordinator=([^ ]+) store=\1 " <<<"$report" && grep -qE "fr_entries=[1-9]" <<<"$report" &&
    ! grep -q "is deprecated" <<<"$report"  # torch 2.8+ gets the Flight Recorder's new names
}
export -f torch_store_nccl
step torch-store-nccl torch_store_nccl
# A rank that times out in NCCL: torch's watchdog dumps the Flight Recorder where distrun said (--log-dir).
torch_fr_dump() {
  local dir rc
  dir=$(mktemp -d)
  timeout -k 5 150 "$distrun" --log-dir "$dir" -- "$python" bench/gpu_fr_timeout.py
  rc=$?
  echo "distrun: exit $rc"
  ls -la "$dir"
  [ "$rc" -ne 0 ] && "$python" - "$dir" <<'PY'
import glob, pickle, sys
files = glob.glob(sys.argv[1] + "/flight-recorder-rank-*")
print("dumps:", files)
dump = pickle.load(open(files[0], "rb"))
entries = dump.get("entries", [])
print("version", dump.get("version"), "entries", len(entries))
for e in entries:
    print(" ", e.get("profiling_name"), e.get("state"), "seq", e.get("collective_seq_id"))
assert any(e.get("profiling_name") == "nccl:all_reduce" and e.get("state") != "completed" for e in entries)
PY
}
export -f torch_fr_dump
step torch-fr-dump torch_fr_dump
step torch-store-tests env DISTRUN_TEST_PYTHON="$(command -v "$python")" DISTRUN_BIN="$distrun" \
  "$python" tests/integration/torch_test.py TorchStore
# The wheel (scripts/build.sh wheel; carry dist/) in a venv of this machine's Python that sees its torch and
# JAX: the venv's distrun runs torch NCCL workers on distrun's store and JAX workers without arguments, each
# also using `import distrun` from the wheel. pip refuses the wheel where glibc is older than its tag.
wheel_venv() {
  local venv whl
  whl=$(ls dist/distrun-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "no dist/distrun-*.whl: build it with scripts/build.sh wheel and carry dist"; return 1; }
  venv=$(mktemp -d)/venv
  "$python" -m venv --system-site-packages "$venv" && "$venv/bin/pip" install -q --no-index "$whl" || return 1
  # Where PYTHON is itself a venv, --system-site-packages reaches its base interpreter, not its packages
  # (torch, JAX): a .pth file in the new venv names PYTHON's site-packages directories.
  "$python" -c "import site; print('\n'.join(site.getsitepackages()))" >"$("$venv/bin/python" -c \
    "import site; print(site.getsitepackages()[0])")/parent-site.pth" || return 1
  ldd --version | head -1
  PATH=$venv/bin:$PATH STORE_WORKER_BACKEND=nccl "$venv/bin/distrun" -- python tests/integration/torch_store_worker.py &&
    PATH=$venv/bin:$PATH "$venv/bin/distrun" --nproc-per-node 2 -- python -c \
      "import distrun, runpy, sys; distrun.set('k%d' % distrun.rank(), 'v'); distrun.barrier('b'); print('distrun module', distrun.library_path()); sys.argv = ['w', 'cpu']; runpy.run_path('bench/gpu_jax_world.py', run_name='__main__')"
}
export -f wheel_venv
step wheel-venv wheel_venv
# 16 cores: each server on CPUs 0-3 (distrun: its default of 4 store loops there), the ranks on 8 loops on
# the other 12; torch 2.x's two servers.
STEP_TIMEOUT=300 step torch-store-bench "$build/bench/distrun-bench" torch-store --ranks "${TORCH_STORE_RANKS:-1000,10000,100000}" \
  --torch-python "$python" --torch-libuv 0,1 --torch-max-ranks 100000 --torch-timeout-s 45 --threads 8 --pin 4
# The same in a network namespace of its own whose accept queues hold every connection
# (net.core.somaxconn is per namespace; the host's 4096 drops thousands of SYNs at 10,000 ranks, and each
# dropped SYN costs its rank a 1 s, then 2 s, retransmission: walls fall on 1 s steps that say more about
# the kernel's timers than about the server).
store_bench_in_netns() {  # inside the namespace: loopback up (ip, or an ioctl where ip is missing)
  ip link set lo up 2>/dev/null || "$python" -c "import fcntl, socket, struct
fcntl.ioctl(socket.socket(), 0x8914, struct.pack('16sH22x', b'lo', 0x49))" || return 1  # SIOCSIFFLAGS UP|LOOPBACK|RUNNING
  sysctl -q -w net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535 || return 1
  "$build/bench/distrun-bench" torch-store --ranks "${TORCH_STORE_RANKS:-1000,10000,100000}" --torch-python "$python" \
    --torch-libuv 0,1 --torch-max-ranks 100000 --torch-timeout-s 45 --threads 8 --pin 4
}
store_bench_netns() { unshare -n bash -c store_bench_in_netns; }
export build
export -f store_bench_in_netns store_bench_netns
STEP_TIMEOUT=300 step torch-store-bench-netns store_bench_netns

# Recovering in place with NCCL: two ranks and a warm spare on GPU 0 (distinct NCCL_HOSTID), one node SIGKILLed
# mid-all-reduce: the survivor's communicator aborted, the group formed again with the spare, the state equal.
step inprocess-nccl "$python" bench/gpu_inprocess_nccl.py "$distrun"

# Launches that end must end every time: 20 more of each kind, each within 60 s.
repeat() {
  local i
  for i in $(seq 1 20); do
    timeout -k 5 60 "$distrun" -- /bin/true || { echo "launch $i of /bin/true: exit $?"; return 1; }
    timeout -k 5 60 "$distrun" check -- --max-bytes 1M --warmup 1 --iters 1 >/dev/null ||
      { echo "check $i: exit $?"; return 1; }
  done
  echo "20 launches of /bin/true and 20 checks ended"
}
export -f repeat
step repeat repeat

printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
