#!/usr/bin/env python3
"""Condenses `heaptrack_print --print-peaks` output: for each top allocation site by peak
memory, its sub-backtraces with the bytes they held at the peak, each named by the first frames
that are Pingora's, tokio's, h2's or ours (src/...), so that a reader sees whose buffer it is.

  heaptrack_print -f profile.zst -p 1 -a 0 -T 0 -l 0 -n 25 -s 4 | heaptrack_summary.py [--per N]

--per N adds the bytes per connection (N = connections open at the peak).
"""

import argparse
import re
import sys

PEAK = re.compile(r"^(\S+) peak memory consumed over (\d+) calls from")
SUB = re.compile(r"^(\S+) consumed over (\d+) calls from:")
HASH = re.compile(r"::h[0-9a-f]{16}$")


def size(s):
    m = re.match(r"^([0-9.]+)([KMG]?)B?$", s)
    if not m:
        return 0.0
    return float(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]


def human(b):
    for unit, f in (("MiB", 1024**2), ("KiB", 1024)):
        if b >= f:
            return f"{b / f:.1f} {unit}"
    return f"{b:.0f} B"


def demangle(name):
    name = HASH.sub("", name.strip())
    for a, b in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$C$", ","), ("..", "::"),
                 ("$u7b$", "{"), ("$u7d$", "}"), ("$RF$", "&"), ("$LP$", "("), ("$RP$", ")")):
        name = name.replace(a, b)
    return name.lstrip("_")


def landmarks(frames, limit=4):
    """frames: [(name, location)] -> the first frames worth naming."""
    out = []
    for name, loc in frames:
        n = demangle(name)
        where = ""
        m = re.search(r"(pingora-[a-z]+-[0-9.]+/src/\S+|h2-[0-9.]+/src/\S+|tokio-[0-9.]+/src/\S+|^src/\S+)", loc)
        if m:
            where = m.group(1)
        interesting = (
            "pingora" in n or "pingora" in where or where.startswith("src/")
            or "waitroom" in n or "h2-" in where or "BufReader" in n or "BytesMut" in n
        )
        if interesting:
            label = n if len(n) < 90 else n[:87] + "..."
            out.append(f"{label}{' (' + where + ')' if where else ''}")
            if len(out) >= limit:
                break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per", type=int, default=0)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    peaks = []
    cur = None
    sub = None
    last_name = None
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        m = PEAK.match(line)
        if m:
            cur = {"total": size(m.group(1)), "calls": int(m.group(2)), "subs": [], "head": []}
            peaks.append(cur)
            sub = None
            continue
        if cur is None:
            continue
        m = SUB.match(line)
        if m:
            sub = {"bytes": size(m.group(1)), "calls": int(m.group(2)), "frames": []}
            cur["subs"].append(sub)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("in /"):
            continue
        target = sub["frames"] if sub is not None else cur["head"]
        if stripped.startswith("at "):
            if target:
                target[-1] = (target[-1][0], stripped[3:])
        else:
            target.append((stripped, ""))
    for i, p in enumerate(peaks[: args.top], 1):
        per = f", {human(p['total'] / args.per)} per connection" if args.per else ""
        print(f"{i}. {human(p['total'])} at the peak over {p['calls']} calls{per}")
        subs = p["subs"] or [{"bytes": p["total"], "calls": p["calls"], "frames": p["head"]}]
        for s in subs:
            # The callers first: in an optimized build the innermost frames of the allocation
            # itself can be folded with another function's (identical code) and misnamed.
            marks = landmarks(s["frames"]) or landmarks(p["head"])
            per = f", {human(s['bytes'] / args.per)}/conn" if args.per else ""
            print(f"   - {human(s['bytes'])} over {s['calls']} calls{per}: " + " <- ".join(marks or ["(no Pingora/tokio/own frame)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
