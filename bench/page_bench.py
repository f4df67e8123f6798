#!/usr/bin/python3
"""The job page's own cost in Chromium with many ranks: runtime/metrics/job_page.html, as node 0 serves it.

  /usr/bin/python3 bench/page_bench.py [--ranks 1000,10000] [--loads 5]

What this measures is the page's own parsing and rendering in headless Chromium (/usr/bin/chromium, driven
by tests/integration/cdp.py), not distrun: the server here is a stand-in, a Python standard-library HTTP
server on 127.0.0.1 that serves the real job_page.html and one fixed, generated job.json of N ranks (every
rank reporting, two sections each, 2% stragglers, one hung, 50 events) under /n/N/, so the page's relative
URLs find it there.

1. Load. --loads times per N, a fresh navigation each time. A script installed before the page's own
   (Page.addScriptToEvaluateOnNewDocument) watches the document and notes performance.now() (whose origin is
   the navigation's start) when the rank table first holds N rows (`rows`: the DOM built, after the fetch
   of job.json and its parsing), and again after the next frame (`frame`: style, layout and paint of it,
   requestAnimationFrame then a task). `wall` is navigate + polling (every 5 ms) for the N rows over CDP, as a
   test sees it, measured in Python.
2. Refresh. On a loaded page, with its own 2-s refresh timer stopped, --loads times: fetch job.json, then
   `parse` (reply.json()), `render` (window.distrunPage.render: the DOM of the header, timeline, table and
   events rebuilt), `frame` (render to the next frame, as above).

Prints medians (and the range) per N, and last one JSON line with every figure. The machine's other load
counts: run it on a quiet machine for figures to keep.
"""
import argparse
import http.server
import json
import os
import statistics
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import cdp  # noqa: E402

PAGE = os.path.join(REPO, "runtime", "metrics", "job_page.html")

# Runs before the page's own script on every navigation: notes when #ranks first holds N rows (N from ?n=).
WATCH = """
(() => {
  const n = Number(new URLSearchParams(location.search).get("n"));
  if (!n) return;
  const observer = new MutationObserver(() => {
    const body = document.getElementById("ranks");
    if (!body || body.rows.length < n) return;
    observer.disconnect();
    window.__rowsAt = performance.now();
    requestAnimationFrame(() => setTimeout(() => { window.__frameAt = performance.now(); }, 0));
  });
  observer.observe(document, {childList: true, subtree: true});
})();
"""

REFRESH = """
(async () => {
  const reply = await fetch("job.json", {cache: "no-store"});
  const t0 = performance.now();
  const job = await reply.json();
  const t1 = performance.now();
  window.distrunPage.render(job);
  const t2 = performance.now();
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  const t3 = performance.now();
  if (document.getElementById("ranks").rows.length !== job.ranks.length) throw new Error("rows missing");
  return [t1 - t0, t2 - t1, t3 - t1];
})()
"""

# Clears every pending timeout (the page's refresh loop among them): ids are small increasing integers.
STOP_TIMERS = "(() => { const last = setTimeout(() => {}, 0); for (let i = 0; i <= last; i++) clearTimeout(i); })()"


def job_json(n):
    """A job.json of n ranks, 8 per node, as the contract describes it."""
    ranks = []
    for r in range(n):
        straggler = r % 50 == 7
        fwd = 0.109 * (1.9 if straggler else 1.0 + (r % 13) / 100)
        ranks.append({"rank": r, "host": f"gpu-node-{r // 8:05d}", "node": r // 8, "pid": 40000 + r,
                      "step": 12000 + r % 3, "step_time_s": 0.51 + (r % 7) / 1000,
                      "steps_per_second": 1.96, "advanced_s_ago": 0.3,
                      "score": round(0.109 / fwd, 3), "straggler": straggler, "section": "fwd",
                      "sections": {"fwd": round(fwd, 4), "bwd": 0.2}, "hung": r == n - 1})
    return json.dumps({
        "run_id": "bench", "state": "running", "epoch": 1, "uptime_s": 3600.0, "restarts": 1, "nodes_lost": 0,
        "num_nodes": (n + 7) // 8, "num_ranks": n, "hung": False, "history": "2 epochs; 1 restart after a failure",
        "straggler_threshold": 0.75, "sections": True,
        "epochs": [{"epoch": 0, "start_s": 0.0, "end_s": 600.0, "ranks": n, "end": "restart: rank 3 exited with code 1"},
                   {"epoch": 1, "start_s": 610.0, "end_s": None, "ranks": n, "end": ""}],
        "ranks": ranks,
        "events": [{"t_s": 700.0 + i, "text": f"rank {i * 50 + 7} (gpu-node-{(i * 50 + 7) // 8:05d}) is a straggler: "
                    "score 0.53 in section fwd"} for i in range(50)],
    }).encode()


def serve(documents):
    """A stand-in for node 0: /n/N/ is the page, /n/N/job.json the fixed job of N ranks."""
    page = open(PAGE, "rb").read()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            parts = self.path.split("?")[0].split("/")  # ['', 'n', N, file]
            if len(parts) == 4 and parts[1] == "n" and parts[2].isdigit() and int(parts[2]) in documents:
                body, kind = {"": (page, "text/html; charset=utf-8"),
                              "index.html": (page, "text/html; charset=utf-8"),
                              "job.json": (documents[int(parts[2])], "application/json")}.get(parts[3], (None, None))
                if body is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    self.wfile.write(body)
                    return
            self.send_error(404)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def summary(values):
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="1000,10000", help="comma-separated rank counts")
    parser.add_argument("--loads", type=int, default=5, help="loads (and refreshes) per rank count")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    counts = [int(x) for x in args.ranks.split(",") if x]
    documents = {n: job_json(n) for n in counts}
    server = serve(documents)
    results = {}
    try:
        with cdp.Chromium(timeout=args.timeout) as browser:
            browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
            for n in counts:
                url = f"http://127.0.0.1:{server.server_port}/n/{n}/?n={n}"
                browser.navigate(url + "&warmup=1")  # the first load also warms Chromium's caches of code
                browser.wait_for(f"window.__frameAt && document.getElementById('ranks').rows.length === {n}",
                                 args.timeout)
                rows, frames, walls = [], [], []
                for i in range(args.loads):
                    start = time.monotonic()
                    browser.navigate(f"{url}&load={i}", args.timeout)
                    browser.wait_for(f"document.getElementById('ranks').rows.length === {n}", args.timeout, 0.005)
                    walls.append((time.monotonic() - start) * 1000)
                    browser.wait_for("window.__frameAt", args.timeout)
                    rows.append(browser.evaluate("window.__rowsAt"))
                    frames.append(browser.evaluate("window.__frameAt"))
                browser.evaluate(STOP_TIMERS)
                parse, render, frame = [], [], []
                for _ in range(args.loads):
                    p, r, f = browser.evaluate(REFRESH, args.timeout)
                    parse.append(p)
                    render.append(r)
                    frame.append(f)
                errors = browser.console_errors() + browser.network_errors()
                if errors:
                    raise AssertionError(f"the page logged errors with {n} ranks:\n" + "\n".join(errors))
                results[n] = {"job_json_bytes": len(documents[n]),
                              "load": {"rows_ms": summary(rows), "frame_ms": summary(frames), "wall_ms": summary(walls)},
                              "refresh": {"parse_ms": summary(parse), "render_ms": summary(render),
                                          "frame_ms": summary(frame)}}
                browser.navigate("about:blank")
    finally:
        server.shutdown()
        server.server_close()

    fmt = lambda s: f"{s['median']:7.1f} ms ({s['min']:.1f}-{s['max']:.1f})"  # noqa: E731
    print(f"job page in headless Chromium; medians (min-max) over {args.loads} loads; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for n, r in results.items():
        print(f"\n{n} ranks (job.json {r['job_json_bytes'] / 1e6:.2f} MB)")
        print(f"  load:    navigation start -> {n} rows in the table  {fmt(r['load']['rows_ms'])}")
        print(f"           navigation start -> that frame drawn      {fmt(r['load']['frame_ms'])}")
        print(f"           navigate + poll for the rows over CDP     {fmt(r['load']['wall_ms'])}")
        print(f"  refresh: job.json parsed                            {fmt(r['refresh']['parse_ms'])}")
        print(f"           render (DOM rebuilt)                       {fmt(r['refresh']['render_ms'])}")
        print(f"           render -> frame drawn                      {fmt(r['refresh']['frame_ms'])}")
    print(json.dumps({"bench": "page", "loads": args.loads, "ranks": results}))


if __name__ == "__main__":
    main()
