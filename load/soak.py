#!/usr/bin/env python3
"""The soak (issue 23): waves of flash crowds against two proxies sharing one Redis for DURATION,
killing the admission leader and restarting Redis now and then, while the proxies' memory, open
descriptors and threads, Redis's memory and keys, and the errors are sampled. Fails when, after
the warm-up, something grows beyond its bound. Run it through load/soak.sh.

Knobs (environment, defaults in brackets):
  DURATION         seconds of crowds [3600]
  WARMUP           seconds not judged: caches, pools and allocator arenas fill [DURATION/6, at
                   least 60]
  WAVE             seconds of one crowd wave; a quiet gap of WAVE/3 follows each [45]
  VISITORS         visitors per wave [150]
  KILL_LEADER      seconds between killing (SIGKILL) the proxy that leads, restarted at once [600]
  RESTART_REDIS    seconds between restarts of redis-server (it keeps its data: appendonly) [900]
  SAMPLE           seconds between samples [5]
  RSS_GROWTH_MB    bound on a proxy's resident memory growth after the warm-up [48]
  FD_GROWTH        bound on a proxy's open descriptors growth after the warm-up, at quiet times [64]
  THREAD_GROWTH    bound on a proxy's threads growth after the warm-up [8]
  KEYS_GROWTH      bound on Redis keys growth between quiet gaps after the warm-up [200]
  REDIS_MEM_GROWTH_MB  bound on Redis used_memory growth between quiet gaps [16]
  WAITROOM_BIN     the proxy [target/release/waitroom-proxy, else target/debug/waitroom-proxy]
  OUT              where the CSV, the SVG and the summary go [load/results/soak-<time>]

Why these bounds: the room's state lives in Redis with expiries (passes a session, waiting
visitors abandon_after, per-address records), so between waves the keys go back to a handful;
a proxy holds per-room state that is swept (verified passes at most 4 096, pass use at most
200 000 entries but swept each session), so after the warm-up its memory should move within the
allocator's slack, a few MiB; a leak of one descriptor or one task per request or per
connection would grow by thousands within minutes. The bounds are loose enough for the
allocator and tight enough to catch that. tokio's task count is not sampled: the proxy does not
export it (tokio's metrics need tokio_unstable); threads and descriptors stand in.

Standard library only. Everything listens on 127.0.0.1; every process started here is stopped on
exit.
"""
import concurrent.futures
import csv
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def env_int(name, default):
    return int(os.environ.get(name, default))


DURATION = env_int("DURATION", 3600)
WARMUP = env_int("WARMUP", max(60, DURATION // 6))
WAVE = env_int("WAVE", 45)
VISITORS = env_int("VISITORS", 150)
KILL_LEADER = env_int("KILL_LEADER", 600)
RESTART_REDIS = env_int("RESTART_REDIS", 900)
SAMPLE = env_int("SAMPLE", 5)
BOUNDS = {
    "rss_mb": env_int("RSS_GROWTH_MB", 48),
    "fds": env_int("FD_GROWTH", 64),
    "threads": env_int("THREAD_GROWTH", 8),
    "keys": env_int("KEYS_GROWTH", 200),
    "redis_mb": env_int("REDIS_MEM_GROWTH_MB", 16),
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*parts):
    print("soak:", *parts, file=sys.stderr, flush=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_listening(port, what, within=30):
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"soak: {what} does not listen on {port}")


class Processes:
    """Every process started here, stopped on exit."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.running = []

    def start(self, args, log_name, **kw):
        out = open(os.path.join(self.tmp, log_name), "ab")
        proc = subprocess.Popen(args, stdout=out, stderr=out, stdin=subprocess.DEVNULL, **kw)
        self.running.append(proc)
        return proc

    def stop(self, proc, sig=signal.SIGINT):
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.running:
            self.running.remove(proc)

    def stop_all(self):
        for proc in reversed(list(self.running)):
            self.stop(proc)


class Redis:
    def __init__(self, procs, port, data_dir):
        self.procs, self.port, self.dir = procs, port, data_dir
        self.proc = None

    def start(self):
        self.proc = self.procs.start(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--dir", self.dir,
             "--protected-mode", "no", "--loglevel", "warning"],
            "redis.log")
        wait_listening(self.port, "redis-server")

    def restart(self):
        self.procs.stop(self.proc, signal.SIGTERM)
        self.start()

    def command(self, *args):
        """One command over RESP, its answer as text (enough for INFO and DBSIZE)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            req = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
            s.sendall(req.encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                data += chunk
                if not chunk or data.startswith(b":") and data.endswith(b"\r\n"):
                    break
                if data.startswith(b"$"):
                    head, _, rest = data.partition(b"\r\n")
                    if len(rest) >= int(head[1:]) + 2:
                        break
            return data.decode(errors="replace")

    def stats(self):
        try:
            keys = int(self.command("DBSIZE").strip().lstrip(":"))
            info = self.command("INFO", "memory")
            used = next(int(l.split(":")[1]) for l in info.splitlines()
                        if l.startswith("used_memory:"))
            return keys, used
        except (OSError, ValueError, StopIteration):
            return None, None


class Proxy:
    def __init__(self, procs, binary, config, name, listen, admin, secrets):
        self.procs, self.binary, self.config, self.name = procs, binary, config, name
        self.listen, self.admin, self.secrets = listen, admin, secrets
        self.proc = None
        self.incarnation = 0

    def start(self):
        env = dict(os.environ, RUST_LOG="warn", **self.secrets)
        self.proc = self.procs.start([self.binary, "--config", self.config],
                                     f"{self.name}.log", env=env)
        self.incarnation += 1
        wait_listening(self.listen, self.name)
        wait_listening(self.admin, f"{self.name} admin")

    def kill(self):
        self.procs.stop(self.proc, signal.SIGKILL)

    def state(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=2)
            c.request("GET", "/admin/state",
                      headers={"Authorization": f"Bearer {self.secrets['WR_ADMIN_TOKEN']}"})
            return json.loads(c.getresponse().read())
        except (OSError, ValueError):
            return {}

    def proc_stats(self):
        pid = self.proc.pid
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(l.split(":", 1) for l in f if ":" in l)
            rss_kib = int(status["VmRSS"].split()[0])
            threads = int(status["Threads"])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            return rss_kib / 1024.0, fds, threads
        except (OSError, KeyError, ValueError):
            return None, None, None


def visitor(port, i, errors):
    """One visitor: asks until let in (at most a minute), a few pages, then checks out."""
    cookie = None
    deadline = time.time() + 60
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    pages = 0
    try:
        while time.time() < deadline and pages < 3:
            headers = {"Accept": "application/json"}
            if cookie:
                headers["Cookie"] = f"waitroom={cookie}"
            c.request("GET", f"/drop/{i}", headers=headers)
            r = c.getresponse()
            body = r.read()
            for name, value in r.getheaders():
                if name.lower() == "set-cookie" and value.startswith("waitroom="):
                    cookie = value.split(";")[0].split("=", 1)[1] or None
            if r.status >= 500:
                errors["5xx"] += 1
            if r.status == 200 and body.startswith(b"<!doctype html><title>shop"):
                pages += 1
                time.sleep(random.uniform(0.5, 1.5))
            else:
                time.sleep(1.0)
        if cookie and pages:
            c.request("GET", "/checkout", headers={"Cookie": f"waitroom={cookie}"})
            c.getresponse().read()
    except (OSError, http.client.HTTPException):
        errors["connection"] += 1
    finally:
        c.close()


def wave(ports, errors, stop_at):
    with concurrent.futures.ThreadPoolExecutor(max_workers=VISITORS) as pool:
        for i in range(VISITORS):
            if time.time() >= stop_at:
                break
            pool.submit(visitor, ports[i % len(ports)], i, errors)
            time.sleep(WAVE / 2 / VISITORS)  # arrivals over the first half of the wave


def judge(rows):
    """Growth after the warm-up, per measure; None when there is not enough to judge."""
    after = [r for r in rows if r["t"] >= WARMUP]
    quiet = [r for r in after if r["quiet"]]
    found = {}

    def growth(values):
        values = [v for v in values if v is not None]
        if len(values) < 4:
            return None
        q = max(1, len(values) // 4)
        return statistics.median(values[-q:]) - statistics.median(values[:q])

    for name in ("a", "b"):
        # Judged over the incarnation that lived longest after the warm-up (a killed leader
        # starts afresh).
        by_life = {}
        for r in after:
            by_life.setdefault(r[f"{name}_life"], []).append(r)
        life = max(by_life.values(), key=len, default=[])
        found[f"{name} rss_mb"] = growth([r[f"{name}_rss_mb"] for r in life])
        found[f"{name} fds"] = growth([r[f"{name}_fds"] for r in life if r["quiet"]])
        found[f"{name} threads"] = growth([r[f"{name}_threads"] for r in life])
    found["redis keys"] = growth([r["redis_keys"] for r in quiet])
    used = [r["redis_used"] for r in quiet if r["redis_used"] is not None]
    found["redis_mb"] = growth([u / 2**20 for u in used])
    failures = []
    for what, value in found.items():
        bound = BOUNDS[what.split(" ")[-1] if " " in what else what]
        if value is not None and value > bound:
            failures.append(f"{what} grew by {value:.1f} after the warm-up (bound {bound})")
    return found, failures


def svg(rows, path):
    """Proxies' RSS and descriptors, Redis keys, over time: one panel each."""
    panels = [("proxy RSS MiB", ["a_rss_mb", "b_rss_mb"]),
              ("proxy open descriptors", ["a_fds", "b_fds"]),
              ("Redis keys", ["redis_keys"])]
    w, h, pad = 860, 170, 50
    colours = ["#1d4ed8", "#b45309"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h * len(panels)}" '
           'font-family="sans-serif" font-size="12">']
    tmax = max((r["t"] for r in rows), default=1) or 1
    for p, (title, cols) in enumerate(panels):
        y0 = p * h
        values = [r[c] for r in rows for c in cols if r[c] is not None]
        vmax = max(values, default=1) or 1
        out.append(f'<text x="{pad}" y="{y0 + 16}">{title} (max {vmax:.0f})</text>')
        out.append(f'<line x1="{pad}" y1="{y0 + h - 20}" x2="{w - 10}" y2="{y0 + h - 20}" '
                   'stroke="#999"/>')
        wx = pad + (w - pad - 10) * WARMUP / tmax
        out.append(f'<line x1="{wx:.1f}" y1="{y0 + 20}" x2="{wx:.1f}" y2="{y0 + h - 20}" '
                   'stroke="#999" stroke-dasharray="4"/>')
        for k, col in enumerate(cols):
            pts = " ".join(
                f"{pad + (w - pad - 10) * r['t'] / tmax:.1f},"
                f"{y0 + h - 20 - (h - 45) * r[col] / vmax:.1f}"
                for r in rows if r[col] is not None)
            out.append(f'<polyline fill="none" stroke="{colours[k]}" points="{pts}"/>')
    out.append(f'<text x="{pad}" y="{h * len(panels) - 4}">seconds (0 to {tmax:.0f}); dashed: '
               'end of the warm-up; blue: proxy a, orange: proxy b</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    binary = os.environ.get("WAITROOM_BIN") or next(
        (b for b in ("target/release/waitroom-proxy", "target/debug/waitroom-proxy")
         if os.path.exists(os.path.join(ROOT, b))), None)
    if not binary:
        raise SystemExit("soak: no waitroom-proxy built (cargo build --release)")
    binary = os.path.join(ROOT, binary)
    out = os.environ.get("OUT") or os.path.join(
        ROOT, "load", "results", time.strftime("soak-%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="soak.")
    procs = Processes(tmp)
    origin_port, redis_port, l1, l2, a1, a2 = free_ports(6)
    secrets = {"WR_JWT_SECRET": os.urandom(24).hex(), "WR_ADMIN_TOKEN": os.urandom(24).hex()}
    try:
        procs.start([sys.executable, os.path.join(ROOT, "load", "stub_origin.py"),
                     "--port", str(origin_port)], "origin.log")
        wait_listening(origin_port, "the stub origin")
        redis = Redis(procs, redis_port, tmp)
        redis.start()
        proxies = []
        for name, listen, admin in (("a", l1, a1), ("b", l2, a2)):
            config = os.path.join(tmp, f"{name}.toml")
            with open(config, "w") as f:
                f.write(f"""[listen]
address = "127.0.0.1:{listen}"
threads = 2
[origin]
address = "127.0.0.1:{origin_port}"
[room]
id = "soak"
name = "Soak"
path = "/drop"
total_active_users = 40
new_users_per_minute = 600
session_duration = "20s"
abandon_after = "15s"
refresh_interval = "1s"
enabled_origin_commands = ["revoke"]
[pass]
cookie_secure = false
[store]
backend = "redis"
url = "redis://127.0.0.1:{redis_port}/0"
leader_ttl = "2s"
[admin]
address = "127.0.0.1:{admin}"
[log]
access = false
# One machine plays the whole crowd from one address.
[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
""")
            proxy = Proxy(procs, binary, config, name, listen, admin, secrets)
            proxy.start()
            proxies.append(proxy)
        log(f"{DURATION} s of waves of {VISITORS} visitors, warm-up {WARMUP} s, leader killed "
            f"every {KILL_LEADER} s, Redis restarted every {RESTART_REDIS} s; files in {out}")

        rows, errors, events = [], {"5xx": 0, "connection": 0}, []
        lock = threading.Lock()
        quiet = threading.Event()
        started = time.time()
        done = threading.Event()

        def sampler():
            while not done.is_set():
                t = time.time() - started
                row = {"t": round(t, 1), "quiet": quiet.is_set()}
                for p in proxies:
                    rss, fds, threads = p.proc_stats()
                    row.update({f"{p.name}_rss_mb": rss, f"{p.name}_fds": fds,
                                f"{p.name}_threads": threads, f"{p.name}_life": p.incarnation})
                row["redis_keys"], row["redis_used"] = redis.stats()
                with lock:
                    row["errors"] = sum(errors.values())
                    rows.append(row)
                done.wait(SAMPLE)

        sampling = threading.Thread(target=sampler, daemon=True)
        sampling.start()
        next_kill, next_restart = KILL_LEADER, RESTART_REDIS
        while time.time() - started < DURATION:
            quiet.clear()
            wave([p.listen for p in proxies], errors, started + DURATION)
            t = time.time() - started
            if t >= next_kill:
                leader = next((p for p in proxies if p.state().get("is_leader")), None)
                if leader:
                    events.append(f"{t:.0f} s: killed the leader ({leader.name}), restarted it")
                    leader.kill()
                    leader.start()
                next_kill += KILL_LEADER
            if t >= next_restart:
                events.append(f"{t:.0f} s: restarted Redis")
                redis.restart()
                next_restart += RESTART_REDIS
            quiet.set()
            time.sleep(WAVE / 3)
        done.set()
        sampling.join()

        fields = ["t", "quiet", "a_rss_mb", "a_fds", "a_threads", "a_life", "b_rss_mb", "b_fds",
                  "b_threads", "b_life", "redis_keys", "redis_used", "errors"]
        with open(os.path.join(out, "series.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
        svg(rows, os.path.join(out, "series.svg"))
        found, failures = judge(rows)
        lines = [f"# Soak, {time.strftime('%Y-%m-%d %H:%M')}",
                 "",
                 f"{DURATION} s, waves of {VISITORS} visitors ({WAVE} s, then {WAVE // 3} s "
                 f"quiet), two proxies ({os.path.relpath(binary, ROOT)}) on one Redis, warm-up "
                 f"{WARMUP} s, a sample every {SAMPLE} s.",
                 "", "| measure (after the warm-up) | growth | bound |", "|---|--:|--:|"]
        for what, value in found.items():
            bound = BOUNDS[what.split(" ")[-1] if " " in what else what]
            shown = "-" if value is None else f"{value:.1f}"
            lines.append(f"| {what} | {shown} | {bound} |")
        last = rows[-1] if rows else {}
        lines += ["", f"Errors seen by the crowd: {errors['5xx']} answers of 500 or more, "
                  f"{errors['connection']} connection failures (some expected while a killed "
                  f"leader restarts or Redis restarts).",
                  f"At the end: proxy a {last.get('a_rss_mb') or 0:.0f} MiB, "
                  f"{last.get('a_fds')} descriptors; proxy b {last.get('b_rss_mb') or 0:.0f} MiB, "
                  f"{last.get('b_fds')} descriptors; Redis {last.get('redis_keys')} keys.",
                  "", "Faults:"] + [f"- {e}" for e in events] + [""]
        lines += ["Verdict: " + ("FAILED: " + "; ".join(failures) if failures else "passed")]
        summary = "\n".join(lines) + "\n"
        with open(os.path.join(out, "summary.md"), "w") as f:
            f.write(summary)
        print(summary)
        return 1 if failures else 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
