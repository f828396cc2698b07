#!/usr/bin/env bash
# Remembered answers benchmark (SPEC 14, issue 21): one replica of the built
# aggregator over portalsim portals at 5 ms, loaded by wrk with a realistic
# repeat pattern: plates drawn from a Zipf distribution (s = ZIPF_S, default
# 1.0) over PLATES distinct plates (default 10000), so that a few are asked
# about again and again and most rarely. Runs it with remember off, with
# remember.fresh on in the process, and with it on in a Redis of the
# benchmark's own, and prints for each: throughput, latency (p50, p99),
# portal calls per query (portalsim's counters), and replica CPU per query
# (/proc/<pid>/stat). Each mode starts with an empty memory.
#
# Installs wrk and redis-server (Debian) when missing. Everything binds to
# loopback on free ports and is stopped on exit.
#   scripts/memory-bench.sh            # DUR=10s PORTALS=6 CONNS=64 PLATES=10000 ZIPF_S=1.0
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DUR:-10s}
portals=${PORTALS:-6}
conns=${CONNS:-64}
plates=${PLATES:-10000}
zipf_s=${ZIPF_S:-1.0}

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v redis-server >/dev/null || need+=(redis-server)
if ((${#need[@]})); then
  echo "installing ${need[*]} (Debian)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  (service redis-server stop || true) >/dev/null 2>&1
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/aggregator" ./cmd/aggregator
go build -o "$work/portalsim" ./cmd/portalsim

free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port" >&2; return 1
}
wait_http() {
  for _ in $(seq 200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done
  echo "$1 never answered" >&2; return 1
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

{
  echo "["
  for i in $(seq "$portals"); do
    sep=","; [[ $i == "$portals" ]] && sep=""
    echo "  {\"id\": \"p$i\", \"name\": \"Portal $i\", \"shape\": \"actas\", \"fault\": {\"mode\": \"slow\", \"latency\": \"5ms\"},"
    echo "   \"records\": [{\"domain\": \"AB001AA\", \"id\": \"P$i-1\", \"date\": \"2026-03-14T09:12:00\", \"amount\": \"1000\", \"status\": \"unpaid\"}]}$sep"
  done
  echo "]"
} >"$work/portals.json"
"$work/portalsim" -listen 127.0.0.1:0 -jurisdictions "$work/portals.json" -config-out "$work/sources.yaml" >"$work/portalsim.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/sources.yaml ]] && break; sleep 0.05; done
[[ -s $work/sources.yaml ]] || { echo "portalsim did not start:" >&2; cat "$work/portalsim.log" >&2; exit 1; }
mapfile -t portal_urls < <(grep -o 'http://127.0.0.1:[0-9]*' "$work/sources.yaml" | sort -u)

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --maxmemory-policy volatile-ttl --logfile "$work/redis.log" >/dev/null &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done

# portal_calls: the calls every portal received so far.
portal_calls() {
  local sum=0 n u
  for u in "${portal_urls[@]}"; do
    n=$(curl -sf "$u/_sim/calls" | grep -o '"total":[0-9]*' | cut -d: -f2)
    sum=$((sum + n))
  done
  echo "$sum"
}

cat >"$work/zipf.lua" <<EOF
-- Plates drawn from a Zipf distribution: rank k (1..N) with probability
-- proportional to 1/k^s; rank k is always the same valid Mercosur plate.
-- (wrk runs LuaJIT, Lua 5.1: no integer division operator.)
local n, s = $plates, $zipf_s
local letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
local cdf, total = {}, 0
for k = 1, n do total = total + 1 / k ^ s; cdf[k] = total end
for k = 1, n do cdf[k] = cdf[k] / total end
local function plate(k)
  k = k - 1
  local a = math.floor(k / 1000) % #letters + 1
  local b = math.floor(k / (1000 * #letters)) % #letters + 1
  return "AB" .. string.format("%03d", k % 1000) .. letters:sub(a, a) .. letters:sub(b, b)
end
math.randomseed(os.time() + math.random(1, 100000))
request = function()
  local u, lo, hi = math.random(), 1, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return wrk.format("GET", "/v1/infractions?domain=" .. plate(lo))
end
EOF

key=$(head -c 32 /dev/urandom | base64)
# run MODE: one replica (MODE off, fresh or redis), one wrk run from an empty memory.
run() {
  local mode=$1 port store="" remember="" memory="" t0 t1 c0 c1 out reqs
  port=$(free_port)
  case $mode in
    off) ;;
    fresh) remember="remember: {fresh: 5m, stale: 1h}"; memory="memory: {key: \"$key\"}" ;;
    redis) remember="remember: {fresh: 5m, stale: 1h}"; memory="memory: {key: \"$key\"}"
           store="store: {redis_url: \"redis://127.0.0.1:$rport/0\", key_prefix: \"bench-$$-$RANDOM:\"}" ;;
  esac
  cat >"$work/agg-$mode.yaml" <<EOF
server: {listen: "127.0.0.1:$port", admin_token: bench-admin}
problems: {base_uri: "https://problems.test/"}
$store
$memory
defaults: {timeout: 2s, retry: {max_retries: 0}, $remember}
$(cat "$work/sources.yaml")
EOF
  "$work/aggregator" -config "$work/agg-$mode.yaml" -log-level warn >"$work/agg-$mode.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_http "http://127.0.0.1:$port/healthz"
  curl -s "http://127.0.0.1:$port/v1/infractions?domain=AB001AA" | grep -q '"complete":true' ||
    { echo "$mode: the first query is not complete" >&2; cat "$work/agg-$mode.log" >&2; exit 1; }
  t0=$(ticks "$pid"); c0=$(portal_calls)
  out=$(wrk -t2 -c"$conns" -d"$dur" --latency -s "$work/zipf.lua" "http://127.0.0.1:$port/v1/infractions")
  t1=$(ticks "$pid"); c1=$(portal_calls)
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  printf '%-6s %8s req/s  p50 %8s  p99 %8s  portal calls %6.3f /query (of %d sources)  replica CPU %5.0f us/query  %s requests\n' \
    "$mode" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '$1 == "50%" {print $2}' <<<"$out")" "$(awk '$1 == "99%" {print $2}' <<<"$out")" \
    "$(awk -v d=$((c1 - c0)) -v n="$reqs" 'BEGIN {print d / n}')" "$portals" \
    "$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$reqs" 'BEGIN {print d / hz * 1e6 / n}')" "$reqs"
  grep -q 'Non-2xx' <<<"$out" && echo "  $mode: $(grep 'Non-2xx' <<<"$out")" >&2
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

echo "$plates plates, Zipf s=$zipf_s, $portals portals at 5 ms, wrk -t2 -c$conns -d$dur; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in off fresh redis; do run "$mode"; done
