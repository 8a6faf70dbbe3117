#!/usr/bin/env python3
"""Open waiting pages for load/open_pages.sh (standard library only, asyncio).

  open_pages.py --port P --count N [--path /] [--fresh | --together]

Opens N keep-alive connections to 127.0.0.1:P and sends one request on each: `GET <path>` with
`Accept: application/json` and no cookie (against waitroom-proxy in a full room, each gets a
ticket: the `waitroom=` cookie is kept per connection). With --fresh, the N tickets are asked
for over 8 connections instead (then closed), and `streams` opens each stream on a connection of
its own: what an open page costs when nothing else was ever asked on its connection. With
--together, each connection opens its stream as soon as its ticket came, on the same
connection, `--concurrency` pages at a time (as the shipped page does); `streams` then leaves
them be. Prints

  ready open <n> failed <n> statuses <code:n,...> cookies <n> seconds <s>

then reads commands, one a line, on stdin:

  streams          on every open connection, `GET /__waitroom/events` with its own cookie; waits
                   for each stream's first event; prints
                   "streams open <n> refused <n> failed <n> statuses <...> seconds <s>"
  count            prints "count streams <open> data <events> alive <heartbeats> ended <n> ..."
  report T         T: a Unix time (the moment the admission was triggered). Prints
                   "called <n> p50 <ms> p99 <ms> max <ms>": from T to the first event saying
                   admitted, over the streams that got one; "server ..." the same from the
                   event's own lastUpdated; "moved ...": from T to the first event after T on
                   every other stream (a new position)
  quit             closes everything and exits (so does EOF or SIGTERM)

Times are wall-clock (time.time()) at the moment the client's event loop read the bytes.
"""

import argparse
import asyncio
import datetime
import json
import resource
import signal
import sys
import threading
import time


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def parse_rfc3339(s):
    try:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


class Page(asyncio.Protocol):
    """One connection: a request answered in full (keep-alive), then perhaps an event stream."""

    def __init__(self, client):
        self.client = client
        self.transport = None
        self.buf = b""
        self.phase = "connect"  # request -> idle -> stream-head -> stream -> ended
        self.waiter = None
        self.status = None
        self.cookie = None
        self.need = 0
        self.chunk_left = None
        self.chunked = False
        self.sse = b""
        self.events = []  # (arrival time, admitted, lastUpdated as Unix time)
        self.alive = 0
        self.closed = False
        self.first_request = None

    # -- transport callbacks
    def connection_made(self, transport):
        self.transport = transport
        # A request waiting for its connection goes out at once, as a browser's does.
        if self.first_request is not None:
            self.phase = "stream-head"
            self.send(self.first_request)
            self.first_request = None

    def connection_lost(self, exc):
        self.closed = True
        if self.phase == "stream":
            self.client.ended += 1
        self.phase = "ended"
        self._done(False)

    def data_received(self, data):
        now = time.time()
        self.buf += data
        try:
            self._parse(now)
        except ValueError:
            self.transport.close()

    # -- helpers
    def _done(self, ok):
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(ok)

    def send(self, request):
        self.buf = b""
        self.transport.write(request)

    def _head(self):
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end].decode("latin-1").split("\r\n")
        self.buf = self.buf[end + 4 :]
        self.status = int(head[0].split()[1])
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            value = value.strip()
            if name == "set-cookie" and value.startswith("waitroom="):
                self.cookie = value.split(";", 1)[0][len("waitroom=") :]
            headers[name] = value
        return headers

    def _parse(self, now):
        while True:
            if self.phase == "request":
                headers = self._head()
                if headers is None:
                    return
                self.need = int(headers.get("content-length", "0"))
                self.phase = "body"
            elif self.phase == "body":
                if len(self.buf) < self.need:
                    return
                self.buf = self.buf[self.need :]
                self.phase = "idle"
                self._done(True)
            elif self.phase == "stream-head":
                headers = self._head()
                if headers is None:
                    return
                if self.status != 200:
                    self.need = int(headers.get("content-length", "0"))
                    self.phase = "refused-body"
                    continue
                self.phase = "stream"
                self.chunk_left = None
                # Without chunked coding the body runs until the connection closes.
                self.chunked = headers.get("transfer-encoding", "").lower() == "chunked"
            elif self.phase == "refused-body":
                if len(self.buf) < self.need:
                    return
                self.buf = self.buf[self.need :]
                self.phase = "idle"
                self._done(False)
            elif self.phase == "stream":
                # Chunked transfer coding: "<hex>\r\n<data>\r\n", ended by a zero-size chunk.
                # chunk_left: None = a size line is next; > 0 = data; 0 = the data's CRLF.
                if not self.chunked:
                    self.sse += self.buf
                    self.buf = b""
                    self._events(now)
                    return
                if self.chunk_left is None:
                    nl = self.buf.find(b"\r\n")
                    if nl < 0:
                        return
                    size = int(self.buf[:nl].split(b";")[0], 16)
                    self.buf = self.buf[nl + 2 :]
                    if size == 0:
                        self.phase = "ended"
                        self.client.ended += 1
                        return
                    self.chunk_left = size
                elif self.chunk_left > 0:
                    if not self.buf:
                        return
                    take = self.buf[: self.chunk_left]
                    self.buf = self.buf[len(take) :]
                    self.chunk_left -= len(take)
                    self.sse += take
                    if self.chunk_left == 0:
                        self._events(now)
                else:
                    if len(self.buf) < 2:
                        return
                    self.buf = self.buf[2:]
                    self.chunk_left = None
            else:
                return

    def _events(self, now):
        while True:
            end = self.sse.find(b"\n\n")
            if end < 0:
                return
            event = self.sse[:end]
            self.sse = self.sse[end + 2 :]
            data = None
            kind = None
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    data = line[5:].strip()
                elif line.startswith(b"event:"):
                    kind = line[6:].strip()
            if kind == b"alive":
                self.alive += 1
                self.client.alive += 1
            elif data:
                admitted = False
                updated = None
                try:
                    body = json.loads(data)
                    admitted = bool(body.get("waitroom", {}).get("admitted"))
                    updated = parse_rfc3339(body.get("cfWaitingRoom", {}).get("lastUpdated"))
                except ValueError:
                    pass
                self.events.append((now, admitted, updated))
                self.client.data += 1
                self._done(True)


class Client:
    def __init__(self, args):
        self.args = args
        self.pages = []
        self.alive = 0
        self.data = 0
        self.ended = 0

    async def request(self, page, request, phase):
        loop = asyncio.get_running_loop()
        page.waiter = loop.create_future()
        page.phase = phase
        page.send(request)
        try:
            return await asyncio.wait_for(page.waiter, 30)
        except asyncio.TimeoutError:
            return False

    def ticket_request(self):
        a = self.args
        return (
            f"GET {a.path} HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nAccept: application/json\r\n"
            "User-Agent: open-pages\r\nConnection: keep-alive\r\n\r\n"
        ).encode()

    def stream_request(self, page):
        cookie = f"Cookie: waitroom={page.cookie}\r\n" if page.cookie else ""
        return (
            f"GET /__waitroom/events HTTP/1.1\r\nHost: 127.0.0.1:{self.args.port}\r\n{cookie}"
            "Accept: text/event-stream\r\nUser-Agent: open-pages\r\n\r\n"
        ).encode()

    def print_ready(self, statuses, failed, took):
        codes = ",".join(f"{k}:{v}" for k, v in sorted(statuses.items()))
        cookies = sum(1 for p in self.pages if p.cookie)
        print(
            f"ready open {len(self.pages)} failed {failed} statuses {codes or '-'} "
            f"cookies {cookies} seconds {took:.1f}",
            flush=True,
        )

    async def open_all(self):
        if self.args.fresh:
            return await self.tickets_only()
        a = self.args
        loop = asyncio.get_running_loop()
        req = self.ticket_request()
        sem = asyncio.Semaphore(a.concurrency)
        statuses, failed = {}, [0]

        async def one():
            async with sem:
                try:
                    _, page = await asyncio.wait_for(
                        loop.create_connection(lambda: Page(self), "127.0.0.1", a.port), 30
                    )
                except (OSError, asyncio.TimeoutError) as e:
                    failed[0] += 1
                    if failed[0] <= 3:
                        print(f"connect failed: {e!r}", file=sys.stderr, flush=True)
                    return
                ok = await self.request(page, req, "request")
                if ok:
                    statuses[page.status] = statuses.get(page.status, 0) + 1
                    self.pages.append(page)
                    if a.together:
                        await self.open_stream(page)
                else:
                    failed[0] += 1
                    page.transport.close()

        start = time.monotonic()
        await asyncio.gather(*(one() for _ in range(a.count)))
        self.print_ready(statuses, failed[0], time.monotonic() - start)

    async def tickets_only(self):
        """N tickets over a few connections; the pages are connected by `streams`."""
        a = self.args
        loop = asyncio.get_running_loop()
        req = self.ticket_request()
        statuses, failed = {}, [0]

        async def one_connection(n):
            _, conn = await loop.create_connection(lambda: Page(self), "127.0.0.1", a.port)
            for _ in range(n):
                conn.cookie = None
                if not await self.request(conn, req, "request"):
                    failed[0] += 1
                    return
                statuses[conn.status] = statuses.get(conn.status, 0) + 1
                page = Page(self)
                page.cookie = conn.cookie
                self.pages.append(page)
            conn.transport.close()

        start = time.monotonic()
        share = [a.count // 8 + (1 if i < a.count % 8 else 0) for i in range(8)]
        await asyncio.gather(*(one_connection(n) for n in share if n))
        self.print_ready(statuses, failed[0], time.monotonic() - start)

    async def open_stream(self, page):
        return await self.request(page, self.stream_request(page), "stream-head")

    async def streams(self):
        a = self.args
        loop = asyncio.get_running_loop()
        sem = asyncio.Semaphore(a.concurrency)
        statuses, failed, refused = {}, [0], [0]

        async def one(page):
            req = self.stream_request(page)
            if page.transport is None:
                async with sem:
                    page.waiter = loop.create_future()
                    page.first_request = req
                    try:
                        await asyncio.wait_for(
                            loop.create_connection(lambda: page, "127.0.0.1", a.port), 30
                        )
                        ok = await asyncio.wait_for(page.waiter, 30)
                    except (OSError, asyncio.TimeoutError):
                        ok = False
            elif page.closed:
                failed[0] += 1
                return
            elif page.phase == "stream":
                ok = True
            else:
                async with sem:
                    ok = await self.request(page, req, "stream-head")
            statuses[page.status] = statuses.get(page.status, 0) + 1
            if not ok:
                if page.status == 200 or page.status is None:
                    failed[0] += 1
                else:
                    refused[0] += 1

        start = time.monotonic()
        await asyncio.gather(*(one(p) for p in self.pages))
        took = time.monotonic() - start
        codes = ",".join(f"{k}:{v}" for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0])))
        n = sum(1 for p in self.pages if p.phase == "stream")
        print(
            f"streams open {n} refused {refused[0]} failed {failed[0]} statuses {codes} "
            f"seconds {took:.1f}",
            flush=True,
        )

    def count(self):
        n = sum(1 for p in self.pages if p.phase == "stream")
        conns = sum(1 for p in self.pages if not p.closed)
        print(
            f"count streams {n} connections {conns} data {self.data} alive {self.alive} "
            f"ended {self.ended}",
            flush=True,
        )

    def report(self, t0):
        called, server, moved = [], [], []
        for p in self.pages:
            after = [e for e in p.events if e[0] >= t0]
            if not after:
                continue
            admitted = [e for e in after if e[1]]
            if admitted:
                when, _, updated = admitted[0]
                called.append((when - t0) * 1000)
                if updated is not None:
                    server.append((updated - t0) * 1000)
            else:
                moved.append((after[0][0] - t0) * 1000)
        for name, v in (("called", called), ("server", server), ("moved", moved)):
            print(
                f"{name} {len(v)} p50 {pct(v, 50):.0f} p99 {pct(v, 99):.0f} "
                f"max {max(v) if v else float('nan'):.0f}",
                flush=True,
            )

    def close(self):
        for p in self.pages:
            if p.transport is not None:
                p.transport.close()


async def main_async(args):
    client = Client(args)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await client.open_all()

    commands = asyncio.Queue()

    def reader():
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, line.strip())
        loop.call_soon_threadsafe(commands.put_nowait, "quit")

    threading.Thread(target=reader, daemon=True).start()
    stopper = asyncio.ensure_future(stop.wait())
    while True:
        getter = asyncio.ensure_future(commands.get())
        done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in done:
            getter.cancel()
            break
        cmd = getter.result().split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "streams":
            await client.streams()
        elif cmd[0] == "count":
            client.count()
        elif cmd[0] == "report" and len(cmd) == 2:
            client.report(float(cmd[1]))
        else:
            print(f"unknown command {cmd}", file=sys.stderr, flush=True)
    client.close()
    await asyncio.sleep(0.2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--path", default="/")
    p.add_argument("--concurrency", type=int, default=200)
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--together", action="store_true")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.count + 256
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        if new < want:
            print(f"error: open-file limit {hard} < {want}", file=sys.stderr)
            return 1
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
