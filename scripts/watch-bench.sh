#!/usr/bin/env bash
# The watches benchmark of docs/benchmarks.md (SPEC 15): WATCHES watches
# (100000) on a throwaway Redis of its own, checked by one replica at RATE
# checks due a second (500) for the first interval, then STEADY (60s). The
# fake portal and receiver run in a process of their own; the replica's
# memory, CPU and check lag, and Redis's memory, are printed.
#   scripts/watch-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pidfile=$(mktemp)
url=$(scripts/provision-redis.sh "$pidfile")
trap 'kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"' EXIT
AGGREGATOR_TEST_REDIS=$url AGGREGATOR_WATCH_SCALE=${WATCHES:-100000} AGGREGATOR_WATCH_RATE=${RATE:-500} \
	AGGREGATOR_WATCH_STEADY=${STEADY:-60s} \
	go test ./watch -run '^TestScale$' -count=1 -timeout 30m -v | grep -E 'scale_test|^(--- |ok|FAIL)'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
