#!/usr/bin/env bash
# Starts a throwaway Redis Cluster: 6 redis-server processes (3 primaries,
# 3 replicas) on free loopback ports, in DIR, and prints their addresses on
# stdout, comma-separated (AGGREGATOR_TEST_REDIS_CLUSTER). Installs Debian's
# redis-server (which brings redis-cli) and redis-sentinel if missing. Stop it with
#   scripts/provision-redis-cluster.sh --stop DIR
# which kills the processes whose pid files DIR holds, then removes DIR.
#   addrs=$(scripts/provision-redis-cluster.sh "$(mktemp -d)")
set -euo pipefail
if [ "${1:-}" = "--stop" ]; then
  dir=${2:?usage: provision-redis-cluster.sh --stop DIR}
  for f in "$dir"/*/redis.pid; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$dir"
  exit 0
fi
dir=${1:?usage: provision-redis-cluster.sh DIR}
# redis-sentinel too: the Sentinel failover test (app) starts its own.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1 ||
  ! command -v redis-sentinel >/dev/null 2>&1; then
  echo "redis-server or redis-sentinel missing: installing Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends redis-server redis-sentinel >&2
  # The packages start system daemons: the tests run their own.
  (service redis-sentinel stop; service redis-server stop) >/dev/null 2>&1 || true
fi
# A node listens on its port and on port+10000 (the cluster bus): both free,
# both below the ephemeral range (ports.sh), neither one another node's.
. "$(dirname "$0")/ports.sh"
ports=()
used=()
for _ in $(seq 6); do
  p=$(free_port 10000 "${used[@]}")
  ports+=("$p")
  used+=("$p" $((p + 10000)))
done
addrs=()
for p in "${ports[@]}"; do
  mkdir -p "$dir/$p"
  # A generous node timeout: on a CI machine busy with the race detector a
  # node may not answer gossip for a second, and a spurious failover would
  # fail unrelated tests. The failover tests start clusters of their own
  # (internal/redistest.StartCluster) with a small timeout.
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 15000 --cluster-replica-validity-factor 0 \
    --save "" --appendonly no --daemonize yes --pidfile "$dir/$p/redis.pid" \
    --dir "$dir/$p" --logfile "$dir/$p/redis.log" >&2
  addrs+=("127.0.0.1:$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
  if ! redis-cli -p "$p" ping >/dev/null 2>&1; then
    # A port was taken after all: start again on others, a few times.
    tries=${PROVISION_CLUSTER_TRIES:-0}
    for q in "${ports[@]}"; do
      [ -s "$dir/$q/redis.pid" ] && kill "$(cat "$dir/$q/redis.pid")" 2>/dev/null || true
    done
    rm -rf "${dir:?}"/*
    if [ "$tries" -lt 3 ]; then
      echo "node $p did not start; trying other ports" >&2
      PROVISION_CLUSTER_TRIES=$((tries + 1)) exec "$0" "$dir"
    fi
    echo "node $p did not start" >&2
    exit 1
  fi
done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >&2
for p in "${ports[@]}"; do
  for _ in $(seq 200); do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
    sleep 0.05
  done
  redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || {
    echo "the cluster did not form; log of $p:" >&2; cat "$dir/$p/redis.log" >&2; exit 1; }
done
(IFS=,; echo "${addrs[*]}")
