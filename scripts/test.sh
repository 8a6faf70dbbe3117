#!/usr/bin/env bash
# Every test waitroom has, as CI runs them: formatting, lints, the shipped configs checked by the
# binary itself, the unit, integration and Redis tests (which start their own redis-server
# processes on free ports), the browser tests in headless Chromium, the k6 flash crowds and the
# autopilot's short runs against a shop with a known knee. One debug build serves all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# No incremental caches: CI builds once from scratch, and they would double target/ on disk.
export CARGO_INCREMENTAL=0

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
scripts/check-doc-links.py
cargo build --locked --bin waitroom-proxy
for config in config/*.toml; do
  WR_JWT_SECRET=ci-secret-ci-secret-ci-secret-ci-secret \
  WR_ADMIN_TOKEN=ci-token-ci-token-ci-token-ci-token-xx \
    target/debug/waitroom-proxy --config "$config" --test >/dev/null
done
cargo test --locked --all-targets
WAITROOM_BIN="$PWD/target/debug/waitroom-proxy" e2e/run.sh
# A short flash crowd under k6 (a few hundred visitors, under a minute each): one proxy on the
# memory store, then two proxies sharing one Redis, then those two proxies with two rooms crowded
# at once (each room's capacity and rate checked on its own). Any failed threshold fails the run.
load/flashcrowd.sh memory
load/flashcrowd.sh redis
ROOMS=2 load/flashcrowd.sh redis
# The autopilot's short run (issue #16, about 2 minutes each): a static sweep, then the autopilot
# from 5x too high, the shop turning 2x slower and back to normal, judged against the sweep's
# best limit; one proxy on the memory store, then two proxies sharing one Redis.
SHORT=1 WAITROOM_BIN="$PWD/target/debug/waitroom-proxy" load/autopilot.sh
SHORT=1 REDIS=1 WAITROOM_BIN="$PWD/target/debug/waitroom-proxy" load/autopilot.sh
# A few minutes of the soak (issue 23): waves of crowds on two proxies sharing Redis, the leader
# killed and Redis restarted once each; fails when memory, descriptors, threads or Redis keys
# grow after the warm-up beyond their bounds (load/soak.py). The hour-long run is in BENCHMARKS.md.
DURATION=180 WARMUP=60 KILL_LEADER=70 RESTART_REDIS=110 \
  WAITROOM_BIN=target/debug/waitroom-proxy load/soak.sh
