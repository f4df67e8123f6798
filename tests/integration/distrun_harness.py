"""Shared helpers for integration tests: run the real distrun binary with a controlled environment."""
import json
import os
import subprocess

DISTRUN = os.path.abspath(os.environ.get("DISTRUN_BIN", "build/release/distrun"))
FIXTURES = os.environ.get("DISTRUN_FIXTURES_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))


def run(args, env=None, cwd=None, timeout=30, stdin=None):
    """Runs distrun with exactly `env` (plus PATH), so the caller's own variables never leak in."""
    full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    full_env.update(env or {})
    try:
        return subprocess.run([DISTRUN] + list(args), env=full_env, cwd=cwd, timeout=timeout, capture_output=True,
                              text=True, stdin=stdin if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        # What distrun said before it was killed is the first thing to know about a job that did not end.
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"distrun {' '.join(map(str, args))} ran past {timeout}s; the end of its stderr:\n"
                             f"{err[-6000:]}") from None


def detect_json(env=None, extra_args=(), cwd=None):
    r = run(["--detect", "--format", "json", *extra_args], env=env, cwd=cwd)
    if r.returncode != 0:
        raise AssertionError(f"distrun --detect failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout), r


def fixture_tasks(relative_path, tasks):
    """Rebuilds each task's environment from a fixture whose lines interleave `tasks` sorted copies."""
    values = {}
    with open(os.path.join(FIXTURES, relative_path)) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" not in line:
                continue
            name, value = line.split("=", 1)
            values.setdefault(name, []).append(value)
    envs = [dict() for _ in range(tasks)]
    for name, vals in values.items():
        for i in range(tasks):
            envs[i][name] = vals[i] if len(vals) == tasks else vals[0]
    return envs


def fixture_env(relative_path, prefix=""):
    env = {}
    with open(os.path.join(FIXTURES, relative_path)) as f:
        for line in f:
            line = line.rstrip("\n")
            if prefix:
                if not line.startswith(prefix):
                    continue
                line = line[len(prefix):]
            if "=" in line:
                name, value = line.split("=", 1)
                env[name] = value
    return env
