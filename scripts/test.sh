#!/usr/bin/env bash
# Runs every test with the race detector, provisioning what the tests need:
# a throwaway Redis and Redis Cluster, Chromium for the dashboard test, promtool for the alert
# rules, and the pinned Node tools (redocly, openapi-typescript, tsc) for the checks of
# api/openapi.yaml's generated clients. Under CI=true nothing that needs a real component
# is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
pidfile=$(mktemp)
clusterdir=$(mktemp -d)
cleanup() {
  [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true; rm -f "$pidfile"
  scripts/provision-redis-cluster.sh --stop "$clusterdir"
}
trap cleanup EXIT
AGGREGATOR_TEST_REDIS=$(scripts/provision-redis.sh "$pidfile")
export AGGREGATOR_TEST_REDIS
echo "test redis: $AGGREGATOR_TEST_REDIS"
AGGREGATOR_TEST_REDIS_CLUSTER=$(scripts/provision-redis-cluster.sh "$clusterdir")
export AGGREGATOR_TEST_REDIS_CLUSTER
echo "test redis cluster: $AGGREGATOR_TEST_REDIS_CLUSTER"
if [ -x scripts/provision-chromium.sh ]; then scripts/provision-chromium.sh; fi
if [ -x scripts/provision-promtool.sh ]; then scripts/provision-promtool.sh; fi
AGGREGATOR_NODE_TOOLS=$(scripts/provision-node-tools.sh)
export AGGREGATOR_NODE_TOOLS
echo "node tools: ${AGGREGATOR_NODE_TOOLS:-(none: the client checks skip)}"
go test -race -count=1 -timeout 10m "${@:-./...}"
