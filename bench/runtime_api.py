"""A stand-in of the Lambda Runtime API on 127.0.0.1, for the cold-path, warm-request and memory benches.

One :class:`RuntimeApi` serves one function process at a time (one "run") a list of events:

- ``GET /2018-06-01/runtime/invocation/next`` hands out the run's next event, with the headers
  of the real API (``Lambda-Runtime-Aws-Request-Id``, ``Lambda-Runtime-Deadline-Ms``,
  ``Lambda-Runtime-Invoked-Function-Arn``, ``Lambda-Runtime-Trace-Id``), and records when it did;
  a ``next`` after the last event is held open (long poll, as Lambda does between invocations)
  until the run ends;
- ``POST /2018-06-01/runtime/invocation/{id}/response`` records when the answer arrived (after
  the first one, also the process's memory high-water mark, ``VmHWM`` of ``/proc/<pid>/status``,
  read *before* replying); the last answer ends the run. ``/invocation/{id}/error`` and
  ``/init/error`` end it as a failure.

Times are ``time.perf_counter_ns()`` of this Python process, the clock of the driver that spawns
the function, so ``responded_ns[0] - spawn_ns`` is the cold path from process start to the first
answered invocation, a second event gives the same call warm, and ``responded_ns[i] - served_ns[i]``
is the latency of request ``i`` on a warm process. A run of a few hundred events costs the stand-in
O(1) per request (appends and lengths only; ``VmHWM`` is read once, after the first response).
Python standard library only; binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

PREFIX = "/2018-06-01/runtime"


def vm_status_kb(pid: int, key: str) -> Optional[int]:
    """A ``kB`` line (e.g. ``VmHWM``) of ``/proc/<pid>/status``, or None if unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Run:
    """The state of one function process: the events it is served, one after the other, and when."""

    events: list[bytes]
    request_ids: list[str] = field(default_factory=list)
    pid: Optional[int] = None
    served_ns: list[int] = field(default_factory=list)
    responded_ns: list[int] = field(default_factory=list)
    responses: list[bytes] = field(default_factory=list)
    error: Optional[str] = None
    hwm_kb: Optional[int] = None
    done: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.request_ids = [str(uuid.uuid4()) for _ in self.events]

    @property
    def current_id(self) -> Optional[str]:
        """The request id of the invocation being answered."""
        i = len(self.served_ns) - 1
        return self.request_ids[i] if 0 <= i < len(self.events) else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out as two writes; with Nagle's algorithm the body
    # would wait for the client's delayed ACK (about 40 ms) and be measured as function time.
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002 - silence the access log
        pass

    def _reply(self, status: int, body: bytes, headers: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):  # noqa: N802 - the http.server API
        run = self.server.run
        if self.path != PREFIX + "/invocation/next" or run is None:
            self._reply(404, b'{"message":"not found"}')
            return
        if len(run.served_ns) >= len(run.events) or len(run.responded_ns) < len(run.served_ns):
            # Nothing more to hand out: the function is idle. Hold it until the driver ends the run.
            run.released.wait(timeout=300)
            self.close_connection = True
            return
        i = len(run.served_ns)
        run.served_ns.append(time.perf_counter_ns())
        deadline_ms = int(time.time() * 1000) + 900_000
        self._reply(
            200,
            run.events[i],
            {
                "Lambda-Runtime-Aws-Request-Id": run.request_ids[i],
                "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": "arn:aws:lambda:us-east-1:000000000000:function:bench",
                "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
            },
        )

    def do_POST(self):  # noqa: N802 - the http.server API
        now = time.perf_counter_ns()
        body = self._body()
        run = self.server.run
        if run is None:
            self._reply(404, b'{"message":"no run"}')
            return
        current = run.current_id
        if current is not None and self.path == f"{PREFIX}/invocation/{current}/response":
            run.responded_ns.append(now)
            run.responses.append(body)
            if run.pid is not None and len(run.responded_ns) == 1:
                run.hwm_kb = vm_status_kb(run.pid, "VmHWM")
            self._reply(202, b'{"status":"OK"}')
            if len(run.responded_ns) == len(run.events):
                run.done.set()
        elif (current is not None and self.path == f"{PREFIX}/invocation/{current}/error") or self.path == f"{PREFIX}/init/error":
            run.error = f"{self.path}: {body.decode(errors='replace')[:2000]}"
            self._reply(202, b'{"status":"OK"}')
            run.done.set()
        else:
            self._reply(404, b'{"message":"not found"}')


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "RuntimeApi"
    run: Run

    def handle_error(self, request, client_address):
        # A function process is killed while its idle `next` is open: expected, not an error.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class RuntimeApi:
    """The stand-in: a fresh server on a fresh port for every run (see :meth:`arm`), each in a
    background thread, until :meth:`close`.

    A fresh port per run matters: a stopped process's last ``next`` can still be in the socket
    buffer when the next run starts; on a shared port it would be handed the next run's event.
    """

    def __init__(self) -> None:
        self.run: Optional[Run] = None
        self._server: Optional[_Server] = None

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` of the current run, the value of ``AWS_LAMBDA_RUNTIME_API``."""
        if self._server is None:
            raise RuntimeError("no run armed")
        return f"127.0.0.1:{self._server.server_address[1]}"

    def arm(self, *events: object) -> Run:
        """Starts a run that serves ``events`` in turn (JSON-encoded unless already bytes), on a
        new port."""
        self.end()
        self.run = Run(events=[e if isinstance(e, bytes) else json.dumps(e).encode() for e in events])
        server = _Server(("127.0.0.1", 0), _Handler)
        server.api = self
        server.run = self.run
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="runtime-api", daemon=True).start()
        self._server = server
        return self.run

    def end(self) -> None:
        """Ends the current run: releases a held ``next`` and retires its server."""
        if self.run is not None:
            self.run.released.set()
        self.run = None
        server, self._server = self._server, None
        if server is not None:
            def stop() -> None:
                server.shutdown()
                server.server_close()

            threading.Thread(target=stop, name="runtime-api-stop", daemon=True).start()

    def close(self) -> None:
        self.end()
