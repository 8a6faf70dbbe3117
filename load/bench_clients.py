#!/usr/bin/env python3
"""Small load clients for load/bench.sh (standard library only).

  bench_clients.py join --port P --count N [--threads 4] [--path /]
      N new visitors: N requests with no cookie (Accept: application/json) over a few keep-alive
      connections; each joins the line when the room is full. Prints one summary line.

  bench_clients.py idle --port P --count N [--cookie VALUE] [--path /]
      Opens N TCP connections, sends one HTTP/1.1 keep-alive request on each, reads the whole
      response and keeps the socket open (idle). Prints "ready ..." when all are open, then waits
      for SIGUSR1 (prints how many are still open, then exits) or SIGTERM (exits).
"""

import argparse
import http.client
import resource
import signal
import socket
import sys
import threading
import time


def join(args):
    per_thread = [args.count // args.threads] * args.threads
    per_thread[0] += args.count - sum(per_thread)
    ok = [0] * args.threads
    bad = [0] * args.threads

    def worker(n, k):
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
        for _ in range(k):
            try:
                conn.request("GET", args.path, headers={"Accept": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
                if resp.status == 200 and b'"inWaitingRoom":true' in body and resp.getheader("set-cookie"):
                    ok[n] += 1
                else:
                    bad[n] += 1
            except (OSError, http.client.HTTPException):
                bad[n] += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
        conn.close()

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i, k)) for i, k in enumerate(per_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    print(f"joined {sum(ok)} errors {sum(bad)} seconds {took:.1f} rate {sum(ok) / took:.0f}", flush=True)
    return 0 if sum(bad) == 0 else 1


def read_response(sock):
    """Reads one HTTP/1.1 response (Content-Length or chunked); returns the status code."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response headers")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        need = int(headers[b"content-length"])
        while len(body) < need:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the body")
            body += chunk
    elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        while not body.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the body")
            body += chunk
    return status


def idle(args):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.count + 256
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        if new < want:
            print(f"error: open-file limit {hard} < {want}", file=sys.stderr)
            return 1

    cookie = f"Cookie: waitroom={args.cookie}\r\n" if args.cookie else ""
    request = (
        f"GET {args.path} HTTP/1.1\r\nHost: 127.0.0.1:{args.port}\r\n{cookie}"
        "User-Agent: bench-idle\r\nConnection: keep-alive\r\n\r\n"
    ).encode()
    socks, failed, statuses = [], 0, {}
    start = time.monotonic()
    for _ in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", args.port))
            s.sendall(request)
            status = read_response(s)
            statuses[status] = statuses.get(status, 0) + 1
            socks.append(s)
        except OSError as e:
            failed += 1
            if failed <= 3:
                print(f"connection failed: {e}", file=sys.stderr)
            s.close()
    took = time.monotonic() - start
    codes = ",".join(f"{k}:{v}" for k, v in sorted(statuses.items()))
    print(f"ready open {len(socks)} failed {failed} statuses {codes} seconds {took:.1f}", flush=True)

    done = threading.Event()
    check = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGUSR1, lambda *_: (check.set(), done.set()))
    while not done.wait(0.2):
        pass
    if check.is_set():
        still = 0
        for s in socks:
            s.setblocking(False)
            try:
                still += 1 if s.recv(1, socket.MSG_PEEK) else 0
            except BlockingIOError:
                still += 1  # nothing to read and not closed: still open
            except OSError:
                pass
        print(f"still_open {still}", flush=True)
    for s in socks:
        s.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("join")
    j.add_argument("--port", type=int, required=True)
    j.add_argument("--count", type=int, required=True)
    j.add_argument("--threads", type=int, default=4)
    j.add_argument("--path", default="/")
    i = sub.add_parser("idle")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--count", type=int, required=True)
    i.add_argument("--cookie", default="")
    i.add_argument("--path", default="/")
    args = p.parse_args()
    return join(args) if args.cmd == "join" else idle(args)


if __name__ == "__main__":
    sys.exit(main())
