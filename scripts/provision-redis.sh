#!/usr/bin/env bash
# Starts a throwaway redis-server on a free loopback port (installing Debian's
# package if it is missing) and prints its URL on stdout. Stop it with
#   kill "$(cat PIDFILE)"
# where PIDFILE is the file given as $1.
#   url=$(scripts/provision-redis.sh /tmp/redis.pid)
set -euo pipefail
pidfile=${1:?usage: provision-redis.sh PIDFILE}
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server missing: installing Debian's package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends redis-server >&2
  # The package may start a system daemon; we only want our throwaway one.
  (service redis-server stop || pkill -x redis-server || true) >/dev/null 2>&1
fi
# Below the ephemeral range: see ports.sh.
. "$(dirname "$0")/ports.sh"
port=$(free_port)
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --pidfile "$pidfile" --dir "$dir" --logfile "$dir/redis.log" >&2
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && { echo "redis://127.0.0.1:$port/0"; exit 0; }
  sleep 0.05
done
echo "redis-server did not start; log:" >&2; cat "$dir/redis.log" >&2; exit 1
