"""The live dashboard's HTTP server (standard library only, one daemon thread).

GET /                     the page (plain HTML + JS + SVG from launch/monitor/dashboard_static/, no CDN)
GET /api/metrics?since=N  records N.. of the run (steps, evals, events) and `next`
GET /api/status           pools, rates, buffer, staleness, idle, last errors (launch/status_view)
GET /metrics              Prometheus text exposition of the newest step
GET /healthz              "ok"

It binds loopback by default (monitor.dashboard_host); bound anywhere else it prints a warning at
start, as it has no login: anyone who can reach the address sees the run.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.prometheus import CONTENT_TYPE as PROM_TYPE
from microcoder.launch.monitor.prometheus import prometheus_text

STATIC = Path(__file__).parent / "dashboard_static"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
StatusFn = Callable[[], dict[str, Any]]


class _CachedStatus:
    """Calls the (possibly slow, Ray-calling) status function at most once per `ttl_s`."""

    def __init__(self, fn: StatusFn, ttl_s: float):
        self.fn = fn
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._value: dict[str, Any] | None = None
        self._at = 0.0

    def get(self) -> dict[str, Any]:
        with self._lock:
            if self._value is None or time.monotonic() - self._at >= self.ttl_s:
                try:
                    self._value = self.fn()
                except Exception as err:  # the page must keep working when a pool is down
                    self._value = {**(self._value or {}), "status_error": str(err)[:300]}
                self._at = time.monotonic()
            return self._value


def _handler(server: DashboardServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the launcher's terminal clean
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, obj: Any) -> None:
            self._send(200, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            url = urlparse(self.path)
            query = parse_qs(url.query)
            try:
                if url.path in ("/", "/index.html"):
                    self._static("index.html")
                elif url.path.startswith("/static/"):
                    self._static(url.path[len("/static/") :])
                elif url.path == "/api/metrics":
                    since = int((query.get("since") or ["0"])[0])
                    self._json({**server.store.since(since), "title": server.title})
                elif url.path == "/api/status":
                    self._json(server.status())
                elif url.path == "/metrics":
                    latest_eval = next(
                        (r for r in reversed(server.store.raw) if r.get("kind") == "eval"), None
                    )
                    body = prometheus_text(server.store.latest_step, latest_eval).encode()
                    self._send(200, body, PROM_TYPE)
                elif url.path == "/healthz":
                    self._send(200, b"ok\n", "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")
            except ValueError as err:
                self._send(400, f"bad request: {err}\n".encode(), "text/plain")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _static(self, name: str) -> None:
            path = (STATIC / name).resolve()
            if path.parent != STATIC.resolve() or not path.is_file() or path.suffix not in TYPES:
                self._send(404, b"not found\n", "text/plain")
                return
            self._send(200, path.read_bytes(), TYPES[path.suffix])

    return Handler


def exposure_warning(host: str) -> str | None:
    """The warning for binding the dashboard on `host`; None for a loopback address."""
    try:
        if host == "localhost" or ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:  # a host name: it may resolve to any interface
        pass
    where = "every interface" if host in ("", "0.0.0.0", "::") else host
    return (
        f"WARNING: the dashboard binds {where} (monitor.dashboard_host = {host!r}), not "
        "loopback: it has no login, so anyone who can reach that address sees the run "
        "(metrics, status, problem ids). Keep the default 127.0.0.1 and use an SSH tunnel "
        "(ssh -L 8266:127.0.0.1:8266 HOST) unless every such network peer may see it."
    )


class DashboardServer:
    """Serves `store` (and `status_fn`) at http://host:port/ from a daemon thread."""

    def __init__(
        self,
        store: MetricsStore,
        status_fn: StatusFn,
        host: str = "127.0.0.1",
        port: int = 0,
        title: str = "microcoder",
        status_ttl_s: float = 2.0,
    ):
        self.store = store
        self.title = title
        self.warning = exposure_warning(host)
        self.status = _CachedStatus(status_fn, status_ttl_s).get
        try:
            self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as err:
            if port == 0:
                raise
            print(
                f"dashboard: port {port} on {host} is not free ({err}); using a free port instead"
            )
            self.httpd = ThreadingHTTPServer((host, 0), _handler(self))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="dashboard", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/"

    def start(self) -> DashboardServer:
        if self.warning:
            print(self.warning, flush=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
