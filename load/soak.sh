#!/usr/bin/env bash
# The soak (issue 23): waves of flash crowds against two proxies sharing one Redis, the leader
# killed and Redis restarted now and then, memory, descriptors, threads, Redis memory and keys
# sampled, and a failure when anything grows after the warm-up beyond its bound.
#
#   load/soak.sh                                  # an hour, the release build if there is one
#   DURATION=180 WARMUP=60 KILL_LEADER=70 RESTART_REDIS=110 load/soak.sh   # what CI runs
#
# The knobs, the bounds and why: load/soak.py's header. Results: load/results/soak-<time>/
# (series.csv, series.svg, summary.md; git-ignored). Exit 1 when a bound is broken.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "soak: redis-server is needed" >&2; exit 1; }
exec python3 load/soak.py
