#!/usr/bin/env python3
"""A tiny shop for load tests: the origin behind waitroom-proxy in load/flashcrowd.sh.

    python3 load/stub_origin.py --port 3000 [--slots 8 --work-ms 20]

Every GET/HEAD/POST answers 200 with a small HTML page and the shop's own cookie
(`shop_session`, so the proxy has to append its pass cookie next to it).
`/checkout` (and anything under it) also sends `Cf-Waiting-Room-Command: revoke`: the proxy
must end the visitor's session, free the slot and strip the header.

`--slots N --work-ms M` model a shop whose bottleneck is a pool of N connections each busy M ms
per request (a database pool, a payment API quota): throughput tops out near N * 1000 / M
requests per second and latency climbs past that, which gives k6-capacity.js a real knee to find.
Without them every request is answered at once. Standard library only; loopback by default.
"""

import argparse
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Shop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the proxy's upstream pool expects
    server_version = "stub-origin"
    pool = None  # threading.BoundedSemaphore when --slots is given
    work_s = 0.0

    def _answer(self, with_body):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.pool is not None:
            with self.pool:
                time.sleep(self.work_s)
        path = self.path.split("?", 1)[0]
        body = (
            "<!doctype html><title>shop</title>"
            f"<p>origin: {path}</p>\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Set-Cookie", "shop_session=abc123; Path=/; HttpOnly")
        if path == "/checkout" or path.startswith("/checkout/"):
            self.send_header("Cf-Waiting-Room-Command", "revoke")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self):
        self._answer(True)

    def do_POST(self):
        self._answer(True)

    def do_HEAD(self):
        self._answer(False)

    def log_message(self, *args):  # one line per request would drown the CI log
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--slots", type=int, default=0, help="concurrent requests served (0: unlimited)")
    ap.add_argument("--work-ms", type=float, default=0.0, help="time each request holds a slot")
    args = ap.parse_args()
    if args.slots > 0:
        Shop.pool = threading.BoundedSemaphore(args.slots)
        Shop.work_s = args.work_ms / 1000.0
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer((args.host, args.port), Shop)
    print(f"stub origin on http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
