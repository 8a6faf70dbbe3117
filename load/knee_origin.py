#!/usr/bin/env python3
"""An origin with a known knee, for the autopilot's runs (issue #16).

    python3 load/knee_origin.py --port 3000 --workers 8 --service-ms 50

The shop has WORKERS workers and every request holds one for SERVICE_MS (jittered by
--jitter, +-20 % by default): up to WORKERS requests in flight are answered in about SERVICE_MS;
beyond that they wait their turn in a first-come first-served line, so latency climbs linearly
with the line (about SERVICE_MS * in_flight / WORKERS) while throughput stays at its ceiling,
WORKERS * 1000 / SERVICE_MS requests per second. That is the knee the autopilot must find.

Control and measurement, on the same port (never queued behind the workers):

    GET  /__knee/stats[?window=10][&excuse=0]
                                     JSON: settings, in flight (busy + queued), requests and
                                     503s so far, and p50/p95/p99/max latency (ms, arrival to
                                     answer) and req/s of the requests served in the last
                                     `window` seconds (1-60); with `excuse` seconds, the
                                     latencies leave out the one stretch that long (whole
                                     seconds) whose removal lowers the p95 most, named in
                                     `excused_s` (seconds before now): one probe of the knee
    POST /__knee/config?service_ms=100[&workers=8][&jitter=0.2][&queue_limit=0]
                                     changes the service time (or the rest) while it runs;
                                     answers the new settings
    POST /__knee/service_time?ms=100 the same, service time only

`--queue-limit N` (0: unbounded) turns the line into a 503 once N requests wait, as an origin
whose pool times out does: the autopilot's error budget sees them. Paths under /static/ are
answered at once without a worker (assets a CDN would serve, which the autopilot excludes).
Every other GET/HEAD/POST answers 200 with a small HTML page. Standard library only; loopback
by default.
"""

import argparse
import collections
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

WINDOW_KEEP_S = 60.0


class Knee:
    """The workers: a first-come first-served line in front of `workers` slots."""

    def __init__(self, workers, service_ms, jitter, queue_limit, seed=None):
        self.lock = threading.Lock()
        self.workers = workers
        self.service_ms = service_ms
        self.jitter = jitter
        self.queue_limit = queue_limit
        self.busy = 0
        self.line = collections.deque()  # threading.Event per waiting request, in arrival order
        self.requests = 0
        self.rejected = 0
        self.done = collections.deque()  # (finished at, latency ms), the last WINDOW_KEEP_S
        self.rng = random.Random(seed)

    def configure(self, workers=None, service_ms=None, jitter=None, queue_limit=None):
        with self.lock:
            if workers is not None:
                self.workers = workers
            if service_ms is not None:
                self.service_ms = service_ms
            if jitter is not None:
                self.jitter = jitter
            if queue_limit is not None:
                self.queue_limit = queue_limit
            self._hand_over()  # more workers: the line moves now
            return self._settings()

    def _settings(self):
        return {
            "workers": self.workers,
            "service_ms": self.service_ms,
            "jitter": self.jitter,
            "queue_limit": self.queue_limit,
            "knee_rps": round(self.workers * 1000.0 / self.service_ms, 1) if self.service_ms else None,
        }

    def _hand_over(self):
        while self.line and self.busy < self.workers:
            self.busy += 1
            self.line.popleft().set()

    def serve(self):
        """Holds a worker for one service time; returns False when the line is full (503)."""
        started = time.monotonic()
        with self.lock:
            self.requests += 1
            if self.busy < self.workers and not self.line:
                self.busy += 1
                turn = None
            elif self.queue_limit and len(self.line) >= self.queue_limit:
                self.rejected += 1
                return False
            else:
                turn = threading.Event()
                self.line.append(turn)
            spread = self.jitter * (2.0 * self.rng.random() - 1.0)
        if turn is not None:
            turn.wait()
        with self.lock:  # the service time in force when the request is taken
            service_s = max(0.0, self.service_ms * (1.0 + spread)) / 1000.0
        try:
            time.sleep(service_s)
        finally:
            finished = time.monotonic()
            with self.lock:
                self.busy -= 1
                self._hand_over()
                self.done.append((finished, (finished - started) * 1000.0))
                while self.done and self.done[0][0] < finished - WINDOW_KEEP_S:
                    self.done.popleft()
        return True

    def stats(self, window_s, excuse_s=0):
        now = time.monotonic()
        with self.lock:
            timed = [(now - t, ms) for t, ms in self.done if t >= now - window_s]
            recent = sorted(ms for _, ms in timed)
            out = self._settings()
            out.update(
                {
                    "in_flight": self.busy + len(self.line),
                    "busy": self.busy,
                    "queued": len(self.line),
                    "requests_total": self.requests,
                    "rejected_total": self.rejected,
                    "window_s": window_s,
                    "completed": len(recent),
                    "rps": round(len(recent) / window_s, 1),
                }
            )
        if excuse_s > 0 and recent:
            out["p95_all_ms"] = round(nearest_rank(recent, 0.95), 1)
            recent, out["excused_s"] = without_worst_stretch(timed, window_s, excuse_s)
        for name, q in (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99)):
            out[name] = round(nearest_rank(recent, q), 1) if recent else None
        out["max_ms"] = round(recent[-1], 1) if recent else None
        return out


def without_worst_stretch(timed, window_s, excuse_s):
    """The latencies (sorted) of `timed` ((age s, ms) pairs) without the `excuse_s` seconds,
    starting on a whole second of age, whose removal leaves the lowest p95; and that stretch."""
    best = None
    start = 0.0
    while start + excuse_s <= window_s:
        kept = sorted(ms for age, ms in timed if not start <= age < start + excuse_s)
        p95 = nearest_rank(kept, 0.95) if kept else 0.0
        if best is None or p95 < best[0]:
            best = (p95, kept, [start, start + excuse_s])
        start += 1.0
    if best is None:
        return sorted(ms for _, ms in timed), None
    return best[1], best[2]


def nearest_rank(sorted_values, q):
    """The q-quantile by nearest rank: the smallest value with at least q of the values at or below."""
    rank = max(1, -(-int(q * 1000) * len(sorted_values) // 1000))  # ceil(q * n) without floats
    return sorted_values[min(rank, len(sorted_values)) - 1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the proxy's upstream pool expects
    server_version = "knee-origin"
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle and the client's delayed
    # ACK add ~40 ms to every response, which would blur the knee.
    disable_nagle_algorithm = True
    knee = None  # Knee

    def _send(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status, value):
        self._send(status, (json.dumps(value) + "\n").encode(), "application/json")

    def _control(self, path, query):
        try:
            if path == "/__knee/stats" and self.command == "GET":
                window = float(query.get("window", ["10"])[0])
                if not 1.0 <= window <= WINDOW_KEEP_S:
                    raise ValueError("window must be between 1 and 60 seconds")
                excuse = float(query.get("excuse", ["0"])[0])
                if not 0.0 <= excuse < window:
                    raise ValueError("excuse must be at least 0 and shorter than the window")
                return self._json(200, self.knee.stats(window, excuse))
            if path in ("/__knee/config", "/__knee/service_time") and self.command == "POST":
                changes = {}
                for key, name, parse, lowest in (
                    ("service_ms", "service_ms", float, 0.0),
                    ("ms", "service_ms", float, 0.0),
                    ("workers", "workers", int, 1),
                    ("jitter", "jitter", float, 0.0),
                    ("queue_limit", "queue_limit", int, 0),
                ):
                    if key in query:
                        value = parse(query[key][0])
                        if value < lowest or (name == "jitter" and value > 1.0):
                            raise ValueError(f"{key}={value} is out of range")
                        changes[name] = value
                if not changes:
                    raise ValueError("nothing to change: service_ms, workers, jitter or queue_limit")
                settings = self.knee.configure(**changes)
                print(f"knee origin: now {settings}", flush=True)
                return self._json(200, settings)
            return self._json(404, {"error": f"no {self.command} {path}"})
        except ValueError as e:
            return self._json(400, {"error": str(e)})

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        url = urlsplit(self.path)
        if url.path.startswith("/__knee/"):
            return self._control(url.path, parse_qs(url.query))
        if not url.path.startswith("/static/") and not self.knee.serve():
            return self._send(503, b"busy\n", "text/plain")
        body = f"<!doctype html><title>shop</title><p>origin: {url.path}</p>\n".encode()
        self._send(200, body, "text/html; charset=utf-8")

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args):  # one line per request would drown the log
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--workers", type=int, default=8, help="requests served at once")
    ap.add_argument("--service-ms", type=float, default=50.0, help="time a request holds a worker")
    ap.add_argument("--jitter", type=float, default=0.2, help="service time spread, +- this fraction")
    ap.add_argument("--queue-limit", type=int, default=0, help="503 once this many wait (0: never)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the jitter (repeatable runs)")
    args = ap.parse_args()
    if args.workers < 1 or args.service_ms < 0 or not 0 <= args.jitter <= 1 or args.queue_limit < 0:
        ap.error("workers >= 1, service-ms >= 0, 0 <= jitter <= 1, queue-limit >= 0")
    Handler.knee = Knee(args.workers, args.service_ms, args.jitter, args.queue_limit, args.seed)
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    knee = Handler.knee.configure()
    print(f"knee origin on http://{args.host}:{args.port}: {knee}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
