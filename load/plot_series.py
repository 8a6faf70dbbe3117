#!/usr/bin/env python3
"""Plots a flash crowd's admin samples (load/flashcrowd.sh's SERIES CSV) as an SVG: occupancy
against capacity, queue length, and admissions in the last minute, over time. Standard library
only, so it runs wherever the load test runs.

    load/plot_series.py load/results/flashcrowd-series.csv docs/flashcrowd.svg --capacity 50

With --autopilot TARGET_MS it draws an autopilot run's series instead (load/autopilot.py's CSV):
the limit and the occupancy, the queue, the origin's p95 against the target and its throughput,
in four panels over time, with the run's marks (a slower origin, back to normal) as vertical lines.

    load/plot_series.py load/results/autopilot/memory-high.csv docs/autopilot-high.svg \
        --autopilot 250 --mark 180:2x slower --mark 270:normal speed
"""
import argparse
import csv
import sys

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 860, 360, 60, 230, 30, 45
SERIES = [
    ("occupancy", "#1d4ed8", "occupancy"),
    ("queue_length", "#b45309", "queue length"),
    ("admitted_last_minute", "#15803d", "admitted in the last minute"),
]


# An autopilot run: panels of (column, colour, label), each with its own scale.
AUTOPILOT_PANELS = [
    ("visitors inside", [("limit", "#dc2626", "limit (total_active_users)"),
                         ("occupancy", "#1d4ed8", "occupancy")]),
    ("visitors waiting", [("queue_length", "#b45309", "queue length")]),
    ("origin p95, ms", [("origin_p95_ms", "#15803d", "origin p95 (last 5 s)")]),
    ("origin throughput, requests/s", [("origin_rps", "#7c3aed", "origin req/s (last 5 s)")]),
]


def number(text):
    """A CSV cell as a number; None for an empty cell (no sample)."""
    return float(text) if text not in ("", None) else None


def plot_autopilot(rows, svg, target_ms, title, marks=()):
    """Writes an autopilot run's series (dicts with elapsed_s and the AUTOPILOT_PANELS columns)
    as an SVG: one panel per quantity, the target as a dashed line in the p95's, and each mark
    (seconds, label) as a vertical line through all of them."""
    width, pad_l, pad_r, pad_t, panel_h, gap = 860, 60, 230, 34, 150, 34
    height = pad_t + len(AUTOPILOT_PANELS) * (panel_h + gap) + 10
    plot_w = width - pad_l - pad_r
    t = [float(r["elapsed_s"]) for r in rows]
    t_max = max(t[-1] if t else 1.0, 1.0)

    def x(v):
        return pad_l + plot_w * v / t_max

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{pad_l}" y="18" font-size="14" font-weight="bold">{title}</text>',
    ]
    for k, (axis, series) in enumerate(AUTOPILOT_PANELS):
        top = pad_t + k * (panel_h + gap)
        bottom = top + panel_h
        values = [v for name, _, _ in series for v in (number(r.get(name)) for r in rows)
                  if v is not None]
        y_max = max(values + [1.0])
        if "p95" in axis:
            y_max = max(y_max, target_ms)
        y_max *= 1.1

        def y(v, top=top, y_max=y_max):
            return top + panel_h * (1 - v / y_max)

        out.append(f'<line x1="{pad_l}" y1="{bottom}" x2="{pad_l + plot_w}" y2="{bottom}" '
                   f'stroke="#333"/>')
        out.append(f'<line x1="{pad_l}" y1="{top}" x2="{pad_l}" y2="{bottom}" stroke="#333"/>')
        out.append(f'<text x="{pad_l + 4}" y="{top - 6}" fill="#555">{axis}</text>')
        for i in range(5):
            v = y_max * i / 4
            out.append(f'<text x="{pad_l - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
            out.append(f'<line x1="{pad_l}" y1="{y(v)}" x2="{pad_l + plot_w}" y2="{y(v)}" '
                       f'stroke="#eee"/>')
        legend = list(series)
        if "p95" in axis:
            out.append(f'<line x1="{pad_l}" y1="{y(target_ms)}" x2="{pad_l + plot_w}" '
                       f'y2="{y(target_ms)}" stroke="#dc2626" stroke-dasharray="6 4"/>')
            legend.append(("target", "#dc2626", f"target ({target_ms:.0f} ms)"))
        for name, colour, _ in series:
            # A gap in the samples (an unanswered request) breaks the line.
            runs, run = [], []
            for a, r in zip(t, rows):
                v = number(r.get(name))
                if v is None:
                    if run:
                        runs.append(run)
                    run = []
                else:
                    run.append(f"{x(a):.1f},{y(v):.1f}")
            if run:
                runs.append(run)
            for run in runs:
                out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                           f'stroke-width="2"/>')
        for i, (_, colour, label) in enumerate(legend):
            ly = top + 10 + i * 20
            out.append(f'<rect x="{width - pad_r + 12}" y="{ly - 9}" width="12" height="12" '
                       f'fill="{colour}"/>')
            out.append(f'<text x="{width - pad_r + 30}" y="{ly + 1}">{label}</text>')
        for i in range(6):
            v = t_max * i / 5
            out.append(f'<text x="{x(v)}" y="{bottom + 14}" text-anchor="middle">{v:.0f}</text>')
    last = pad_t + len(AUTOPILOT_PANELS) * (panel_h + gap) - gap
    for at, label in marks:
        out.append(f'<line x1="{x(at):.1f}" y1="{pad_t}" x2="{x(at):.1f}" y2="{last}" '
                   f'stroke="#6b7280" stroke-dasharray="3 3"/>')
        out.append(f'<text x="{x(at) + 3:.1f}" y="{pad_t + 12}" fill="#6b7280">{label}</text>')
    out.append(f'<text x="{pad_l + plot_w / 2}" y="{height - 4}" text-anchor="middle">'
               f'seconds</text>')
    out.append("</svg>")
    with open(svg, "w") as f:
        f.write("\n".join(out) + "\n")


def mark(text):
    at, _, label = text.partition(":")
    return float(at), label or at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--capacity", type=float, default=None)
    ap.add_argument("--title", default=None)
    ap.add_argument("--autopilot", type=float, metavar="TARGET_MS", default=None,
                    help="an autopilot run's CSV (load/autopilot.py), with this p95 target")
    ap.add_argument("--mark", type=mark, action="append", default=[],
                    metavar="SECONDS:LABEL", help="a vertical line (autopilot runs)")
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{args.csv}: no samples")
    if args.autopilot is not None:
        plot_autopilot(rows, args.svg, args.autopilot, args.title or "Autopilot run", args.mark)
        return
    args.title = args.title or "Flash crowd: the room under load"
    t = [float(r["elapsed_s"]) for r in rows]
    cols = {name: [float(r[name]) for r in rows] for name, _, _ in SERIES}
    y_max = max(max(v) for v in cols.values())
    if args.capacity:
        y_max = max(y_max, args.capacity)
    y_max = max(1.0, y_max * 1.1)
    t_max = max(t[-1], 1.0)
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def x(v):
        return PAD_L + plot_w * v / t_max

    def y(v):
        return PAD_T + plot_h * (1 - v / y_max)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{PAD_L}" y="18" font-size="14" font-weight="bold">{args.title}</text>',
        f'<line x1="{PAD_L}" y1="{y(0)}" x2="{PAD_L + plot_w}" y2="{y(0)}" stroke="#333"/>',
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{y(0)}" stroke="#333"/>',
    ]
    for i in range(6):
        v = y_max * i / 5
        out.append(f'<text x="{PAD_L - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        out.append(f'<line x1="{PAD_L}" y1="{y(v)}" x2="{PAD_L + plot_w}" y2="{y(v)}" '
                   f'stroke="#eee"/>')
    for i in range(6):
        v = t_max * i / 5
        out.append(f'<text x="{x(v)}" y="{y(0) + 16}" text-anchor="middle">{v:.0f}</text>')
    out.append(f'<text x="{PAD_L + plot_w / 2}" y="{H - 8}" text-anchor="middle">seconds</text>')
    legend = list(SERIES)
    if args.capacity:
        out.append(f'<line x1="{PAD_L}" y1="{y(args.capacity)}" x2="{PAD_L + plot_w}" '
                   f'y2="{y(args.capacity)}" stroke="#dc2626" stroke-dasharray="6 4"/>')
        legend = legend + [("capacity", "#dc2626", "capacity (total_active_users)")]
    for name, colour, _ in SERIES:
        points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(t, cols[name]))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"/>')
    for i, (_, colour, label) in enumerate(legend):
        ly = PAD_T + 10 + i * 20
        out.append(f'<rect x="{W - PAD_R + 12}" y="{ly - 9}" width="12" height="12" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{W - PAD_R + 30}" y="{ly + 1}">{label}</text>')
    out.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
