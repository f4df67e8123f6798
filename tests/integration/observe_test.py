"""What node 0 shows of a running job (--metrics-address): Prometheus' metrics checked by promtool and
scraped by a real Prometheus server (Debian's), the job's page in headless Chromium (Debian's), straggler
detection from distrun.section with one slow rank, `distrun status`'s scores, and the endpoint's guards."""
import json
import os
import re
import socket
import subprocess
import threading
import unittest
import urllib.error
import urllib.parse
import urllib.request

from distrun_harness import DISTRUN, run
from launch_helpers import LaunchCase, wait_for
from multi_node import MultiNodeCase, free_port
from python_workers import module_env, python_command

import cdp

PROMTOOL = "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"
JOB_TOKEN = "observe-test-job-token"

# Rank SLOW_RANK takes 3x as long in its section while the file `slow` exists in the job's directory; every
# rank ends when `stop` appears there. Rank 0 writes `distrun status` into status.txt when `status-now`
# appears.
WORKER = r"""
import os, subprocess, sys, time
import distrun
here = sys.argv[1]
rank = distrun.rank()
slow = int(os.environ.get("SLOW_RANK", "-1"))
step = 0
status_done = False
while not os.path.exists(os.path.join(here, "stop")):
    lag = rank == slow and os.path.exists(os.path.join(here, "slow"))
    if os.environ.get("SECTIONS") == "1":
        with distrun.section("fwd"):
            time.sleep(0.06 if lag else 0.02)
    else:
        time.sleep(0.02)
    step += 1
    distrun.progress(step)
    if rank == 0 and not status_done and os.path.exists(os.path.join(here, "status-now")):
        status_done = True
        r = subprocess.run([os.environ["DISTRUN_BIN"], "status"], capture_output=True, text=True)
        with open(os.path.join(here, "status.tmp"), "w") as f:
            f.write(r.stdout + r.stderr)
        os.rename(os.path.join(here, "status.tmp"), os.path.join(here, "status.txt"))
"""


def get(url, headers=None, timeout=30):
    """(status, headers, body) of a GET, errors included."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


class StderrLines:
    """distrun's stderr, read on a thread, so that a test can wait for a line while the job runs."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def text(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait(self, pattern, timeout):
        found = []

        def seen():
            found[:] = re.findall(pattern, self.text(), re.M)
            return bool(found)

        if not wait_for(seen, timeout=timeout):
            raise AssertionError(f"no line matching {pattern!r} within {timeout}s; distrun said:\n{self.text()}")
        return found[0]


class ObserveCase(LaunchCase):
    def start_job(self, nproc=4, sections=True, slow_rank=-1, extra=()):
        with open(self.path("worker.py"), "w") as f:
            f.write(WORKER)
        if slow_rank >= 0:
            open(self.path("slow"), "w").close()
        env = self.env(DISTRUN_TOKEN=JOB_TOKEN, SLOW_RANK=str(slow_rank), SECTIONS="1" if sections else "0",
                       DISTRUN_BIN=DISTRUN, **module_env())
        self.job = self.popen(["--nproc-per-node", str(nproc), "--metrics-address", "127.0.0.1:0",
                               *extra, "--", *python_command(), self.path("worker.py"), self.dir],
                              env=env, stderr=subprocess.PIPE)
        self.err = StderrLines(self.job.stderr)
        self.url = self.err.wait(r"job page and metrics at (http://127\.0\.0\.1:\d+/)$", timeout=30)

    def stop_job(self):
        open(self.path("stop"), "w").close()
        try:
            self.job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the job did not end after `stop`; distrun said:\n" + self.err.text())
        self.err.thread.join(timeout=5)
        self.assertEqual(self.job.returncode, 0, self.err.text())

    def job_json(self):
        status, _, body = get(self.url + "job.json")
        self.assertEqual(status, 200, body)
        return json.loads(body)


class SlowRank(ObserveCase):
    def setUp(self):
        super().setUp()
        for program in (PROMTOOL, PROMETHEUS, cdp.CHROMIUM):
            if not os.path.exists(program):
                self.fail(f"{program} is missing: scripts/install-deps.sh installs prometheus and chromium")
        self.prometheus = None

    def tearDown(self):
        if self.prometheus is not None and self.prometheus.poll() is None:
            self.prometheus.terminate()  # the server this test started
            try:
                self.prometheus.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.prometheus.kill()
                self.prometheus.wait()
            self.prometheus_log.close()
        super().tearDown()

    def start_prometheus(self, target):
        port = free_port()
        data = self.path("prometheus-data")
        with open(self.path("prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    f"scrape_configs:\n  - job_name: distrun\n    static_configs:\n      - targets: ['{target}']\n")
        self.prometheus_log = open(self.path("prometheus.log"), "w")
        self.prometheus = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + self.path("prometheus.yml"), "--storage.tsdb.path=" + data,
             "--web.listen-address=127.0.0.1:%d" % port, "--storage.tsdb.retention.time=1h"],
            stdin=subprocess.DEVNULL, stdout=self.prometheus_log, stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", self.marker_name: self.marker_value})
        return f"http://127.0.0.1:{port}/"

    def query(self, prometheus, expression):
        status, _, body = get(prometheus + "api/v1/query?" + urllib.parse.urlencode({"query": expression}), timeout=5)
        if status != 200:
            return []
        return json.loads(body)["data"]["result"]

    def test_a_slow_rank_is_named_scraped_shown_and_recovers(self):
        self.start_job(slow_rank=2, sections=True)
        target = urllib.parse.urlsplit(self.url).netloc
        prometheus = self.start_prometheus(target)

        # One warning line, naming rank, host, score and both medians, after several windows.
        line = self.err.wait(r"^distrun: warning: (rank 2 \(\S+\) is a straggler: score [\d.]+ in section fwd "
                             r"\(median [\d.]+ s; fastest rank [\d.]+ s\))$", timeout=60)
        score = float(re.search(r"score ([\d.]+)", line).group(1))
        self.assertLess(score, 0.75, line)
        self.assertGreater(score, 0.15, line)
        self.assertEqual(len(re.findall("is a straggler", self.err.text())), 1, self.err.text())
        self.assertNotRegex(self.err.text(), r"rank [013] \(\S+\) is a straggler")

        # Prometheus' format, as promtool reads it; the labels Prometheus owns are never used.
        status, headers, metrics = get(self.url + "metrics")
        self.assertEqual(status, 200, metrics)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + "\n" + metrics)
        for name in ("distrun_ranks 4", "distrun_epoch 0", "distrun_restarts_total 0", "distrun_nodes_lost_total 0",
                     "distrun_hung 0", "distrun_stragglers 1"):
            self.assertIn("\n" + name + "\n", metrics)
        # Node 0's ranks carry its host name, as every other node's do, not the coordinator's address.
        host = re.escape(socket.gethostname())
        for rank in range(4):
            self.assertRegex(metrics, r'(?m)^distrun_rank_step\{rank="%d",host="%s"\} \d+$' % (rank, host))
            self.assertRegex(metrics, r'(?m)^distrun_rank_section_seconds\{rank="%d",host="%s",section="fwd"\} '
                                      r'[\d.e-]+$' % (rank, host))
            self.assertRegex(metrics, r'(?m)^distrun_rank_straggler_score\{rank="%d",host="%s"\} [\d.e-]+$'
                             % (rank, host))
        self.assertNotRegex(metrics, r'[{,](job|instance)=')

        # The page's document.
        job = self.job_json()
        self.assertEqual((job["state"], job["epoch"], job["num_ranks"], job["sections"]), ("running", 0, 4, True))
        self.assertEqual([r["straggler"] for r in job["ranks"]], [False, False, True, False])
        self.assertEqual({r["host"] for r in job["ranks"]}, {socket.gethostname()}, job["ranks"])
        self.assertNotIn(JOB_TOKEN, json.dumps(job))

        # `distrun status` shows every rank's score.
        open(self.path("status-now"), "w").close()
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("status.txt")), timeout=30), self.err.text())
        with open(self.path("status.txt")) as f:
            status_text = f.read()
        self.assertIn("straggler scores", status_text)
        self.assertRegex(status_text, r"(?m)^\s+2 \S+\s+0\.\d\d  fwd \([\d.]+ s\)  STRAGGLER$")
        # The others' scores are shown and none is marked (their exact value follows the machine's load:
        # a healthy rank scored 0.77 with two suites building and running beside it).
        for rank in (0, 1, 3):
            self.assertRegex(status_text, r"(?m)^\s+%d \S+\s+[01]\.\d\d  fwd \([\d.]+ s\)$" % rank)

        # A real Prometheus scrapes it: the target is up and rank 2's score is below the threshold there too.
        def scraped():
            result = self.query(prometheus, 'distrun_rank_straggler_score{rank="2"}')
            return result and float(result[0]["value"][1]) < 0.75
        if not wait_for(scraped, timeout=60):
            with open(self.path("prometheus.log")) as f:
                self.fail("Prometheus did not scrape the score; its log:\n" + f.read()[-4000:])
        up = self.query(prometheus, 'up{job="distrun"}')
        self.assertEqual([r["value"][1] for r in up], ["1"])
        ranks = self.query(prometheus, "distrun_rank_step")
        self.assertEqual(sorted(r["metric"]["rank"] for r in ranks), ["0", "1", "2", "3"])

        # The page, in headless Chromium: the ranks, the straggler marked, the merged stacks on request.
        with cdp.Chromium(window_size=(1400, 900)) as browser:
            browser.navigate(self.url)
            browser.wait_for("document.querySelectorAll('#ranks tr').length === 4", timeout=30)
            browser.wait_for("document.getElementById('status').textContent.startsWith('updated ')", timeout=30)
            self.assertEqual(browser.evaluate(
                "Array.from(document.querySelectorAll('#ranks tr.straggler')).map(r => r.dataset.rank)"), ["2"])
            self.assertGreaterEqual(browser.evaluate("document.querySelectorAll('#timeline .bar').length"), 1)
            self.assertNotIn(JOB_TOKEN, browser.evaluate("document.documentElement.outerHTML"))
            browser.evaluate("document.getElementById('token').value = %s" % json.dumps(JOB_TOKEN))
            browser.evaluate("document.getElementById('collect').click()")
            browser.wait_for("document.querySelectorAll('#stacks .frame').length > 0", timeout=60)
            labels = browser.evaluate("Array.from(document.querySelectorAll('#stacks .frame')).map(f => f.title)")
            self.assertTrue(any("worker.py" in label for label in labels), labels)
            self.assertNotIn(JOB_TOKEN, browser.evaluate("document.documentElement.outerHTML + location.href"))
            screenshot = os.environ.get("DISTRUN_PAGE_SCREENSHOT") or self.path("page.png")
            browser.screenshot(screenshot, full_page=True)
            self.assertEqual(browser.console_errors(), [])
            self.assertEqual(browser.network_errors(), [])

        # Rank 2 catches up: one line says so.
        os.unlink(self.path("slow"))
        self.err.wait(r"^distrun: warning: rank 2 \(\S+\) is no longer a straggler: score [\d.]+", timeout=60)
        self.assertEqual([r["straggler"] for r in self.job_json()["ranks"]], [False] * 4)
        self.stop_job()
        self.assertEqual(len(re.findall("is a straggler", self.err.text())), 1, self.err.text())


class Guards(ObserveCase):
    def test_without_sections_no_straggler_is_claimed(self):
        self.start_job(nproc=2, sections=False)
        self.assertTrue(wait_for(lambda: all(r["step"] for r in self.job_json()["ranks"]) and
                                 len(self.job_json()["ranks"]) == 2, timeout=30), self.job_json())
        job = self.job_json()
        self.assertFalse(job["sections"])
        self.assertEqual([r["score"] for r in job["ranks"]], [None, None])
        _, _, metrics = get(self.url + "metrics")
        self.assertIn("\ndistrun_stragglers 0\n", metrics)
        self.assertNotIn("distrun_rank_straggler_score{", metrics)
        self.assertRegex(metrics, r'(?m)^distrun_rank_step\{rank="1",host="[^"]+"\} \d+$')
        open(self.path("status-now"), "w").close()
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("status.txt")), timeout=30), self.err.text())
        with open(self.path("status.txt")) as f:
            self.assertIn("no rank marks sections", f.read())
        self.stop_job()
        self.assertNotIn("straggler", self.err.text())

    def test_a_bearer_token_guards_everything_and_stacks_need_the_job_token(self):
        with open(self.path("metrics-token"), "w") as f:
            f.write("scrape-secret\n")
        self.start_job(nproc=2, sections=True, extra=["--metrics-token-file", self.path("metrics-token")])
        for page in ("metrics", "job.json", "", "stacks.json"):
            status, headers, body = get(self.url + page)
            self.assertEqual(status, 401, (page, body))
            self.assertEqual(headers["WWW-Authenticate"], 'Bearer realm="distrun"')
            status, _, _ = get(self.url + page, {"Authorization": "Bearer wrong"})
            self.assertEqual(status, 401, page)
        bearer = {"Authorization": "Bearer scrape-secret"}
        status, headers, body = get(self.url, bearer)
        self.assertEqual((status, headers["Content-Type"]), (200, "text/html; charset=utf-8"))
        self.assertNotIn(JOB_TOKEN, body)
        self.assertNotRegex(body, r"(src|href)=\"(https?:)?//")  # nothing from elsewhere
        status, _, body = get(self.url + "stacks.json", bearer)
        self.assertEqual(status, 403, body)
        self.assertIn("job token", json.loads(body)["error"])
        status, _, body = get(self.url + "stacks.json", dict(bearer, **{"X-Distrun-Token": "not-it"}))
        self.assertEqual(status, 403, body)
        status, _, body = get(self.url + "stacks.json", dict(bearer, **{"X-Distrun-Token": JOB_TOKEN}))
        self.assertEqual(status, 200, body)
        stacks = json.loads(body)
        self.assertEqual((stacks["ranks"], stacks["tree"]["count"]), (2, 2))
        self.assertNotIn(JOB_TOKEN, body)
        # Read-only, and nothing but its pages.
        request = urllib.request.Request(self.url + "job.json", data=b"{}", headers=bearer, method="POST")
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        self.assertEqual(refused.exception.code, 405)
        self.assertEqual(get(self.url + "nothing-here", bearer)[0], 404)
        self.stop_job()

    def test_bad_settings_are_refused_in_one_line(self):
        token = self.path("empty-token")
        open(token, "w").close()
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = "127.0.0.1:%d" % busy.getsockname()[1]
        cases = [
            (["--metrics-address", "localhost"], "--metrics-address='localhost' is not valid; use HOST:PORT"),
            (["--metrics-address", "127.0.0.1:70000"], "--metrics-address"),
            (["--straggler-threshold", "1.5"], "use a score between 0 and 1"),
            (["--straggler-threshold", "fast"], "use a score between 0 and 1"),
            (["--metrics-address", "127.0.0.1:0", "--metrics-token-file", token], "cannot read a token from it"),
            (["--metrics-address", "127.0.0.1:0", "--metrics-token-file", self.path("missing")],
             "cannot read a token from it"),
            (["--metrics-address", taken], "cannot serve the job's metrics and page at " + taken),
        ]
        try:
            for args, message in cases:
                r = run([*args, "--nproc-per-node", "1", "--", "/bin/true"], env=self.env())
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, (args, r.stderr))
                self.assertIn(message, lines[0], args)
        finally:
            busy.close()


class Takeover(MultiNodeCase):
    def test_after_node_0s_loss_the_standby_serves_the_job_at_the_same_address(self):
        metrics = "127.0.0.1:%d" % free_port()
        script = ('echo up > $OUT/up-$NODE-$DISTRUN_EPOCH; '
                  'if [ $DISTRUN_EPOCH = 0 ]; then sleep 60; fi; while [ ! -e $OUT/go ]; do sleep 0.05; done')
        nodes = self.start_nodes([1, 1, 1], script, "--nnodes", "2:3", "--heartbeat-timeout", "2",
                                 "--metrics-address", metrics)
        self.assertTrue(wait_for(lambda: all(os.path.exists(self.path(f"up-{n}-0")) for n in range(3)), timeout=30))

        def job():
            try:
                status, _, body = get(f"http://{metrics}/job.json", timeout=2)
            except OSError:
                return None
            return json.loads(body) if status == 200 else None

        before = job()
        self.assertEqual((before["epoch"], before["num_nodes"], before["nodes_lost"]), (0, 3, 0))
        nodes[0].kill()
        after = []
        if not wait_for(lambda: after.append(job()) or (after[-1] or {}).get("epoch", 0) >= 1, timeout=60):
            for p in nodes[1:]:
                p.kill()
            self.fail("no epoch 1 at %s: %s; what nodes 1 and 2 said: %s"
                      % (metrics, after[-3:], [r[2] for r in self.finish(nodes[1:])]))
        self.assertEqual((after[-1]["nodes_lost"], after[-1]["num_nodes"]), (1, 2), after[-1])
        self.assertNotEqual(after[-1]["run_id"], "")
        self.assertEqual(after[-1]["run_id"], before["run_id"])
        _, _, text = get(f"http://{metrics}/metrics")
        self.assertIn("\ndistrun_nodes_lost_total 1\n", text)
        open(self.path("go"), "w").close()
        results = self.finish(nodes[1:])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertIn("job page and metrics at http://" + metrics + "/", results[0][2])
        self.finish(nodes[:1])


if __name__ == "__main__":
    unittest.main()
