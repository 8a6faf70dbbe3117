#!/usr/bin/env python3
"""Plots a flash crowd's admin samples (load/flashcrowd.sh's SERIES CSV) as an SVG: occupancy
against capacity, queue length, and admissions in the last minute, over time. Standard library
only, so it runs wherever the load test runs.

    load/plot_series.py load/results/flashcrowd-series.csv docs/flashcrowd.svg --capacity 50
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--capacity", type=float, default=None)
    ap.add_argument("--title", default="Flash crowd: the room under load")
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{args.csv}: no samples")
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
