#!/usr/bin/env bash
# Runs every test with the race detector, provisioning what the tests need:
# a throwaway Redis, Chromium for the dashboard test, promtool for the alert
# rules. Under CI=true nothing that needs a real component is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
pidfile=$(mktemp)
cleanup() { [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"; }
trap cleanup EXIT
AGGREGATOR_TEST_REDIS=$(scripts/provision-redis.sh "$pidfile")
export AGGREGATOR_TEST_REDIS
echo "test redis: $AGGREGATOR_TEST_REDIS"
if [ -x scripts/provision-chromium.sh ]; then scripts/provision-chromium.sh; fi
if [ -x scripts/provision-promtool.sh ]; then scripts/provision-promtool.sh; fi
go test -race -count=1 -timeout 10m "${@:-./...}"
