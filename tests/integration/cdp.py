#!/usr/bin/python3
"""A minimal Chrome DevTools Protocol driver for headless Chromium, standard library only.

    with cdp.Chromium() as browser:
        browser.navigate("http://127.0.0.1:8080/")
        browser.wait_for("document.querySelectorAll('#ranks tr').length === 4")
        print(browser.evaluate("document.title"))
        browser.screenshot("/tmp/page.png")
        assert browser.console_errors() == []

Chromium (Debian's `chromium` package, /usr/bin/chromium) runs with --headless=new, --no-sandbox (root
needs it), its own temporary profile and --remote-debugging-port=0; the port it picked is read from the
profile's DevToolsActivePort. The driver speaks to the one page target over a WebSocket of its own (no
websocket package is installed: `WebSocket` below is the client side of RFC 6455). Chromium runs in a
process group of its own, which close() ends, with the profile.

console_errors() is what the page itself reported: console.error/console.warn, uncaught exceptions and
unhandled rejections, and the browser's log entries of level error or warning, except those of source
"network". Those (network_errors()) are Chromium's own "Failed to load resource: ... 403" lines, which it
logs for every HTTP error status or refused connection of any request, fetch() included, and which no page
code can prevent or catch: a test that expects a 403 or a server that is gone looks at network_errors()
on its own.
"""
import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse

CHROMIUM = "/usr/bin/chromium"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, 1.3


class CDPError(Exception):
    """A DevTools command answered with an error, or JavaScript threw in evaluate()."""


class WebSocket:
    """The client side of RFC 6455 over a plain TCP socket: text frames out (masked, as a client must),
    text messages in (any length, fragmented or not), pings answered, close answered."""

    def __init__(self, url, timeout=10.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ws":
            raise ValueError("only ws:// URLs: " + url)
        path = parts.path + ("?" + parts.query if parts.query else "")
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
        self.buf = b""  # bytes read but not yet consumed as a whole frame
        self.fragments = []  # payloads of a fragmented message so far
        self.closed = False
        key = base64.b64encode(os.urandom(16))
        request = (f"GET {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline):
                raise ConnectionError("no WebSocket handshake answer from " + url)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if len(lines[0].split()) < 2 or lines[0].split()[1] != "101":
            raise ConnectionError(f"WebSocket handshake refused by {url}: {lines[0]}")
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("WebSocket handshake: wrong Sec-WebSocket-Accept from " + url)

    def _fill(self, deadline):
        """Reads what has arrived into self.buf, waiting until deadline (None: not at all). False on timeout;
        ConnectionError when the peer closed."""
        remaining = 0.0 if deadline is None else deadline - time.monotonic()
        if remaining <= 0 and deadline is not None:
            return False
        self.sock.settimeout(remaining if deadline is not None else 0.0)
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, BlockingIOError):
            return False
        if not data:
            self.closed = True
            raise ConnectionError("the WebSocket peer closed the connection")
        self.buf += data
        return True

    def _frame(self):
        """Takes one whole frame off self.buf: (fin, opcode, payload), or None while it is incomplete. Only
        consumes a whole frame, so a timeout in the middle of one loses nothing."""
        b = self.buf
        if len(b) < 2:
            return None
        fin, opcode, masked, length, at = b[0] >> 7, b[0] & 0x0F, b[1] >> 7, b[1] & 0x7F, 2
        if length == 126:
            if len(b) < 4:
                return None
            length, at = struct.unpack(">H", b[2:4])[0], 4
        elif length == 127:
            if len(b) < 10:
                return None
            length, at = struct.unpack(">Q", b[2:10])[0], 10
        mask = b""
        if masked:  # a server must not mask, but reading it costs nothing
            if len(b) < at + 4:
                return None
            mask, at = b[at:at + 4], at + 4
        if len(b) < at + length:
            return None
        payload, self.buf = b[at:at + length], b[at + length:]
        if mask:
            payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        return fin, opcode, payload

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])  # FIN: this driver never fragments what it sends
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        # XOR as one big integer: a per-byte loop is slow on the megabytes a screenshot can take.
        masked = (int.from_bytes(payload, "big") ^
                  int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big") if n else b""
        self.sock.settimeout(10.0)
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        if self.closed:
            raise ConnectionError("the WebSocket is closed")
        self._send_frame(0x1, text.encode())

    def recv_text(self, deadline):
        """The next text message, or None if none is whole by deadline (None: only what already arrived)."""
        while True:
            frame = self._frame()
            if frame is None:
                if self.closed or not self._fill(deadline):
                    return None
                continue
            fin, opcode, payload = frame
            if opcode == 0x9:  # ping: answer with the same payload
                self._send_frame(0xA, payload)
            elif opcode == 0xA:  # pong
                pass
            elif opcode == 0x8:  # close: answer it, then report
                if not self.closed:
                    try:
                        self._send_frame(0x8, payload[:2])
                    except OSError:
                        pass
                self.closed = True
                raise ConnectionError("the WebSocket peer sent close " + payload[:2].hex())
            elif opcode in (0x0, 0x1, 0x2):  # continuation, text, binary (CDP sends text)
                if opcode != 0x0:
                    self.fragments = []
                self.fragments.append(payload)
                if fin:
                    message, self.fragments = b"".join(self.fragments), []
                    return message.decode("utf-8")
            else:
                raise ConnectionError(f"WebSocket: unknown opcode {opcode}")

    def close(self):
        if not self.closed:
            try:
                self._send_frame(0x8, struct.pack(">H", 1000))
            except OSError:
                pass
            self.closed = True
        self.sock.close()


class Chromium:
    """One headless Chromium and its one page, driven over the DevTools protocol. A context manager."""

    def __init__(self, chromium=CHROMIUM, timeout=30.0, window_size=(1280, 900), extra_args=()):
        assert os.path.isfile(chromium) and os.access(chromium, os.X_OK), (
            f"{chromium} is missing: the page tests need Chromium (Debian: apt-get install chromium)")
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="distrun-cdp-")
        self.proc = None
        self.ws = None
        self.next_id = 0
        self.loads = 0  # Page.loadEventFired seen so far
        self.errors = []  # what the page reported (console_errors)
        self.network = []  # Chromium's network log lines (network_errors)
        self.network_enabled = False
        try:
            self._start(chromium, window_size, extra_args)
        except BaseException:
            self.close()
            raise

    def _start(self, chromium, window_size, extra_args):
        self.stderr = open(os.path.join(self.dir, "chromium.stderr"), "wb")
        profile = os.path.join(self.dir, "profile")
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={window_size[0]},{window_size[1]}",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             *extra_args, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr, start_new_session=True)
        deadline = time.monotonic() + self.timeout
        port_file = os.path.join(profile, "DevToolsActivePort")
        port = None
        while port is None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{chromium} exited with {self.proc.returncode} before it listened:\n"
                                     + self._stderr_tail())
            if time.monotonic() > deadline:
                raise AssertionError(f"{chromium} wrote no {port_file} in {self.timeout} s:\n"
                                     + self._stderr_tail())
            try:
                with open(port_file) as f:
                    content = f.read()
                first = content.split("\n")[0].strip()
                # Whole only once its line has ended: "PORT\n/devtools/browser/ID".
                port = int(first) if "\n" in content and first.isdigit() else None
            except FileNotFoundError:
                pass
            if port is None:
                time.sleep(0.05)
        self.port = port
        page = None
        while page is None:  # the first page target can show up a moment after the port
            page = next((t for t in self._http("GET", "/json/list") if t.get("type") == "page"), None)
            if page is None:
                if time.monotonic() > deadline:
                    page = self._http("PUT", "/json/new?" + urllib.parse.quote("about:blank"))
                else:
                    time.sleep(0.05)
        self.ws = WebSocket(page["webSocketDebuggerUrl"], timeout=self.timeout)
        for domain in ("Runtime", "Log", "Page"):
            self.send(domain + ".enable")

    def _stderr_tail(self):
        try:
            with open(os.path.join(self.dir, "chromium.stderr"), "rb") as f:
                return f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""

    def _http(self, method, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request(method, path)
            reply = conn.getresponse()
            body = reply.read()
            if reply.status != 200:
                raise AssertionError(f"DevTools {method} {path}: HTTP {reply.status} {body[:200]!r}")
            return json.loads(body)
        finally:
            conn.close()

    # The protocol: commands by id, events in between.

    def _event(self, message):
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self.loads += 1
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", a.get("type")))) for a in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description") or details.get("text", "")
            self.errors.append(f"exception at {details.get('url', '')}:{details.get('lineNumber', '?')}: "
                               + description)
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") in ("error", "warning"):
                line = f"log {entry.get('level')} ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}"
                (self.network if entry.get("source") == "network" else self.errors).append(line.rstrip())

    def _pump(self, deadline):
        """Handles one message; returns it, or None when none came by deadline."""
        text = self.ws.recv_text(deadline)
        if text is None:
            return None
        message = json.loads(text)
        if "method" in message:
            self._event(message)
        return message

    def send(self, method, params=None, timeout=None):
        """Sends one command and returns its result; CDPError if it answers an error."""
        self.next_id += 1
        my_id = self.next_id
        self.ws.send_text(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            message = self._pump(deadline)
            if message is None:
                raise TimeoutError(f"DevTools: no answer to {method} in {timeout or self.timeout} s")
            if message.get("id") == my_id:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error'].get('message')} {message['error'].get('data', '')}")
                return message.get("result", {})

    def drain(self):
        """Handles the events that have already arrived."""
        while self._pump(None) is not None:
            pass

    # What tests use.

    def navigate(self, url, timeout=None):
        """Loads url and waits for its load event."""
        timeout = timeout or self.timeout
        before = self.loads
        result = self.send("Page.navigate", {"url": url}, timeout)
        if result.get("errorText"):
            raise AssertionError(f"navigate {url}: {result['errorText']}")
        deadline = time.monotonic() + timeout
        while self.loads == before:
            if self._pump(deadline) is None:
                raise TimeoutError(f"{url} did not fire its load event in {timeout} s")

    def evaluate(self, expression, timeout=None):
        """The value of a JavaScript expression in the page (a promise is awaited); CDPError if it throws.
        Values come back as JSON does (undefined: None)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True, "userGesture": True}, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CDPError(f"{expression!r} threw: "
                           + (details.get("exception", {}).get("description") or details.get("text", "")))
        return result.get("result", {}).get("value")

    def wait_for(self, predicate, timeout=10.0, interval=0.05):
        """Waits until the JavaScript expression predicate is truthy; returns its value. AssertionError on
        timeout. Evaluation errors (a page between two documents, an element not there yet) count as false."""
        deadline = time.monotonic() + timeout
        last_error = None
        while True:
            try:
                value = self.evaluate(predicate, timeout=max(1.0, deadline - time.monotonic()))
                if value:
                    return value
            except CDPError as e:
                last_error = e
            if time.monotonic() > deadline:
                raise AssertionError(f"not true in {timeout} s: {predicate}"
                                     + (f" (last error: {last_error})" if last_error else ""))
            self._pump(time.monotonic() + interval)  # handles events while it waits

    def console_errors(self):
        """What the page reported of its own so far (see the module's docstring)."""
        self.drain()
        return list(self.errors)

    def network_errors(self):
        """Chromium's network log lines of level error/warning so far (a 403, a refused connection)."""
        self.drain()
        return list(self.network)

    def clear_errors(self):
        self.drain()
        self.errors, self.network = [], []

    def set_extra_headers(self, headers):
        """Headers every later request of the page carries (for instance Authorization)."""
        if not self.network_enabled:
            self.send("Network.enable")
            self.network_enabled = True
        self.send("Network.setExtraHTTPHeaders", {"headers": dict(headers)})

    def screenshot(self, path, full_page=False):
        """Saves the page as a PNG: the viewport, or with full_page the whole document."""
        params = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = self.send("Page.captureScreenshot", params, timeout=max(self.timeout, 60))["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        """Ends Chromium (its whole process group) and removes its profile. Safe to call twice."""
        if self.ws is not None:
            try:
                self.ws.close()
            except OSError:
                pass
            self.ws = None
        if self.proc is not None:
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)  # the group start_new_session made: pgid == its pid
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    if sig == signal.SIGTERM:
                        # Chromium's helpers (zygote, renderers) share its group and may outlive it.
                        time.sleep(0.2)
                        try:
                            os.killpg(self.proc.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    break
                except subprocess.TimeoutExpired:
                    continue
            self.proc = None
        if getattr(self, "stderr", None) is not None:
            self.stderr.close()
            self.stderr = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main():
    """Command line: python3 tests/integration/cdp.py URL OUT.png [--wait JS] [--full] [--header K:V ...]"""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("url")
    parser.add_argument("png")
    parser.add_argument("--wait", default="true", help="a JavaScript predicate to wait for before the shot")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--size", default="1280x900", help="the window, WIDTHxHEIGHT")
    parser.add_argument("--full", action="store_true", help="the whole document, not the viewport")
    parser.add_argument("--header", action="append", default=[], help="an extra request header, NAME:VALUE")
    args = parser.parse_args()
    width, height = (int(x) for x in args.size.split("x"))
    with Chromium(timeout=args.timeout, window_size=(width, height)) as browser:
        if args.header:
            browser.set_extra_headers({k.strip(): v.strip() for k, v in (h.split(":", 1) for h in args.header)})
        browser.navigate(args.url)
        browser.wait_for(args.wait, timeout=args.timeout)
        browser.screenshot(args.png, full_page=args.full)
        for line in browser.console_errors() + browser.network_errors():
            print(line)
    print(args.png)


if __name__ == "__main__":
    main()
