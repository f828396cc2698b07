#!/usr/bin/env bash
# Fleet benchmark (SPEC 11, issue 14): 3 replicas of the built aggregator
# behind haproxy (round robin), over portalsim portals at 5 ms, loaded by wrk
# with a random valid plate per request: one fleet with each replica on its
# own state, one sharing a Redis of the benchmark's own, both up at once and
# measured in turn (memory, redis, memory, redis… one pair per run), so that
# a change in the machine's load weighs on both alike. Prints, for each:
# throughput, replica CPU per query (the three replicas' user+system time
# from /proc/<pid>/stat over the requests), Redis CPU and commands per query
# (INFO commandstats delta), and the calls a portal receives after it dies
# under load (portalsim's counter, from the moment it goes down to the end).
# Then the ratios of SPEC 11's goals, each run's and their median:
# throughput with Redis ≥ 0.9× without, Redis commands per query ≤ 1,
# replica CPU per query with Redis ≤ 1.1×.
#
# Installs haproxy, wrk and redis-server (Debian) when missing. Everything
# binds to loopback on free ports below the ephemeral range (ports.sh) and
# is stopped on exit; the logs and configurations are deleted after a
# successful run, and kept (the script says where) after a failure.
#   scripts/fleet-bench.sh            # DUR=10s PORTALS=6 RUNS=1 CONNS=64 (docs/benchmarks.md: RUNS=3 DUR=8s)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DUR:-10s}
portals=${PORTALS:-6}
runs=${RUNS:-1}
conns=${CONNS:-64}

need=()
command -v haproxy >/dev/null || need+=(haproxy)
command -v wrk >/dev/null || need+=(wrk)
command -v redis-server >/dev/null || need+=(redis-server)
if ((${#need[@]})); then
  echo "installing ${need[*]} (Debian)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  # Their packages may start system daemons: ours are throwaway ones.
  for s in haproxy redis-server; do (service "$s" stop || true) >/dev/null 2>&1; done
fi

work=$(mktemp -d)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if ((rc == 0)); then
    rm -rf "$work"
  else
    echo "fleet-bench failed (exit $rc): logs and configurations kept in $work" >&2
  fi
}
trap cleanup EXIT

. scripts/ports.sh
used=() # ports picked already, whose servers may not listen yet
port() {
  local p
  p=$(free_port 0 "${used[@]}")
  used+=("$p")
  echo "$p"
}

go build -o "$work/aggregator" ./cmd/aggregator
go build -o "$work/portalsim" ./cmd/portalsim

# wait_http URL LOG: waits until URL answers; else says so, with LOG's end.
wait_http() {
  for _ in $(seq 200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done
  echo "$1 never answered; the end of $2:" >&2
  tail -20 "$2" >&2
  return 1
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# Portals: healthy at 5 ms; p1 is the one that dies under load.
{
  echo "["
  for i in $(seq "$portals"); do
    sep=","; [[ $i == "$portals" ]] && sep=""
    echo "  {\"id\": \"p$i\", \"name\": \"Portal $i\", \"shape\": \"actas\", \"fault\": {\"mode\": \"slow\", \"latency\": \"5ms\"},"
    echo "   \"records\": [{\"domain\": \"AB123CD\", \"id\": \"P$i-1\", \"date\": \"2026-03-14T09:12:00\", \"amount\": \"1000\", \"status\": \"unpaid\"}]}$sep"
  done
  echo "]"
} >"$work/portals.json"
"$work/portalsim" -listen 127.0.0.1:0 -jurisdictions "$work/portals.json" -config-out "$work/sources.yaml" >"$work/portalsim.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/sources.yaml ]] && break; sleep 0.05; done
[[ -s $work/sources.yaml ]] || { echo "portalsim did not start:" >&2; cat "$work/portalsim.log" >&2; exit 1; }
p1=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/sources.yaml" | head -1)

rport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" >/dev/null &
redis_pid=$!
pids+=($redis_pid)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$rport" ping >/dev/null 2>&1 || { echo "redis-server did not start:" >&2; cat "$work/redis.log" >&2; exit 1; }

# commands: the commands replicas sent so far (INFO commandstats), and all
# commands Redis ran, those of the scripts included, as "sent all".
# Replicas send scripts (EVALSHA, EVAL), the health check's EXISTS and PING,
# and a few plain commands at start-up; everything else runs inside scripts.
commands() {
  redis-cli -p "$rport" info commandstats | tr -d '\r' | awk -F'[=,:]' '
    /^cmdstat_/ && $1 != "cmdstat_info" && $1 != "cmdstat_config" {
      all += $3
      if ($1 ~ /^cmdstat_(evalsha|eval|exists|ping|subscribe|script)/) sent += $3
    }
    END {print sent + 0, all + 0}'
}

# fleet MODE: starts 3 replicas (MODE memory or redis) behind haproxy;
# sets replicas[MODE] (their pids) and lb[MODE] (the balancer's URL).
declare -A replicas lb
fleet() {
  local mode=$1 store="" ports=() i p lbport
  [[ $mode == redis ]] && store="store: {redis_url: \"redis://127.0.0.1:$rport/0\", key_prefix: \"bench-$$:\"}"
  replicas[$mode]=""
  for i in 1 2 3; do
    p=$(port)
    cat >"$work/agg-$mode-$i.yaml" <<EOF
server: {listen: "127.0.0.1:$p", admin_token: bench-admin}
problems: {base_uri: "https://problems.test/"}
$store
defaults: {timeout: 2s, retry: {max_retries: 0}}
$(cat "$work/sources.yaml")
EOF
    "$work/aggregator" -config "$work/agg-$mode-$i.yaml" -log-level warn >"$work/agg-$mode-$i.log" 2>&1 &
    pids+=($!)
    replicas[$mode]+="$! "
    ports+=("$p")
  done
  lbport=$(port)
  {
    printf 'global\n  maxconn 4096\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n'
    printf 'frontend fleet\n  bind 127.0.0.1:%s\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n  http-reuse always\n' "$lbport"
    for i in 0 1 2; do printf '  server r%d 127.0.0.1:%s\n' "$i" "${ports[$i]}"; done
  } >"$work/haproxy-$mode.cfg"
  haproxy -f "$work/haproxy-$mode.cfg" -db >"$work/haproxy-$mode.log" 2>&1 &
  pids+=($!)
  for i in 0 1 2; do wait_http "http://127.0.0.1:${ports[$i]}/healthz" "$work/agg-$mode-$((i + 1)).log"; done
  lb[$mode]="http://127.0.0.1:$lbport"
  wait_http "${lb[$mode]}/healthz" "$work/haproxy-$mode.log"
  curl -s "${lb[$mode]}/v1/infractions?domain=AB123CD" | grep -q '"complete":true' ||
    { echo "$mode: the first query is not complete" >&2; exit 1; }
}

cat >"$work/plates.lua" <<'EOF'
-- A different valid Mercosur plate on every request: nothing can be
-- coalesced or cached.
local letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
math.randomseed(os.time() + math.random(1, 100000))
local function l() local i = math.random(1, #letters) return letters:sub(i, i) end
request = function()
  local plate = l() .. l() .. string.format("%03d", math.random(0, 999)) .. l() .. l()
  return wrk.format("GET", "/v1/infractions?domain=" .. plate)
end
EOF

declare -A rps cpu rcpu cmds allcmds dead last_rps last_cpu
# measure MODE: one wrk run against MODE's fleet, with the CPU and commands
# it cost.
measure() {
  local mode=$1 t0=() t1=() r0 r1 c0 c1 a0 a1 out reqs i sum=0 rp
  read -ra rp <<<"${replicas[$mode]}"
  for p in "${rp[@]}"; do t0+=("$(ticks "$p")"); done
  r0=$(ticks "$redis_pid"); read -r c0 a0 < <(commands)
  out=$(wrk -t2 -c"$conns" -d"$dur" -s "$work/plates.lua" "${lb[$mode]}/v1/infractions")
  for p in "${rp[@]}"; do t1+=("$(ticks "$p")"); done
  r1=$(ticks "$redis_pid"); read -r c1 a1 < <(commands)
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  for i in 0 1 2; do sum=$((sum + t1[i] - t0[i])); done
  last_rps[$mode]=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  last_cpu[$mode]=$(awk -v d="$sum" -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.0f", d / hz * 1e6 / n}')
  rps[$mode]+="${last_rps[$mode]} "
  cpu[$mode]+="${last_cpu[$mode]} "
  rcpu[$mode]+="$(awk -v d=$((r1 - r0)) -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.1f", d / hz * 1e6 / n}') "
  cmds[$mode]+="$(awk -v d=$((c1 - c0)) -v n="$reqs" 'BEGIN {printf "%.3f", d / n}') "
  allcmds[$mode]+="$(awk -v d=$((a1 - a0)) -v n="$reqs" 'BEGIN {printf "%.3f", d / n}') "
  if grep -q 'Non-2xx' <<<"$out"; then echo "  $mode: $(grep 'Non-2xx' <<<"$out")" >&2; fi
  echo "  $mode: ${last_rps[$mode]} req/s, ${last_cpu[$mode]} us CPU/query, $reqs requests" >&2
}

# kill_portal MODE: portal p1 dies 2s into a load of MODE's fleet; counts
# the calls it receives from then to the end of the load.
kill_portal() {
  local mode=$1 n0 n1
  total() { grep -o '"total":[0-9]*' | cut -d: -f2; }
  curl -sf -X PUT -d '{"mode":"slow","latency":"5ms"}' "$p1/_sim/fault" >/dev/null
  wrk -t2 -c"$conns" -d6s -s "$work/plates.lua" "${lb[$mode]}/v1/infractions" >/dev/null &
  local w=$!
  sleep 2
  # The count, then the death, back to back on one connection: the calls
  # counted from then on reached a dead portal.
  n0=$(curl -sf "$p1/_sim/calls" --next -sf -o /dev/null -X PUT -d '{"mode":"down"}' "$p1/_sim/fault" | total)
  wait "$w"
  n1=$(curl -sf "$p1/_sim/calls" | total)
  dead[$mode]=$((n1 - n0))
  curl -sf -X PUT -d '{"mode":"slow","latency":"5ms"}' "$p1/_sim/fault" >/dev/null
}

modes=(memory redis)
for mode in "${modes[@]}"; do
  echo "fleet of 3 replicas, $mode state: starting" >&2
  fleet "$mode"
done
for mode in "${modes[@]}"; do
  wrk -t2 -c"$conns" -d2s -s "$work/plates.lua" "${lb[$mode]}/v1/infractions" >/dev/null # warm-up
done
# Interleaved: each run measures both fleets, one right after the other,
# and gives its own ratios.
tratio="" cratio=""
for run in $(seq "$runs"); do
  echo "run $run:" >&2
  for mode in "${modes[@]}"; do measure "$mode"; done
  tratio+="$(awk -v a="${last_rps[redis]}" -v b="${last_rps[memory]}" 'BEGIN {printf "%.3f", a / b}') "
  cratio+="$(awk -v a="${last_cpu[redis]}" -v b="${last_cpu[memory]}" 'BEGIN {printf "%.3f", a / b}') "
done
for mode in "${modes[@]}"; do kill_portal "$mode"; done
echo "  Redis commands of the whole benchmark, most called first:" >&2
redis-cli -p "$rport" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ {print "    " $3 "\t" $1 "\t" $7 " us/call"}' |
  sort -rn | head -6 >&2

median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "load avg: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $portals portals at 5ms; wrk -t2 -c$conns -d$dur; $runs runs, interleaved"
echo "(memory's Redis figures are the Redis fleet idling meanwhile: its refreshes and health checks)"
for mode in "${modes[@]}"; do
  printf '%-6s  %8s req/s  replica CPU %5s us/query  Redis CPU %5s us/query  Redis commands %6s /query sent (%s with those inside scripts)  dead portal got %s calls\n' \
    "$mode" "$(median <<<"${rps[$mode]}")" "$(median <<<"${cpu[$mode]}")" "$(median <<<"${rcpu[$mode]}")" \
    "$(median <<<"${cmds[$mode]}")" "$(median <<<"${allcmds[$mode]}")" "${dead[$mode]}"
done
echo "throughput redis/memory by run: $tratio"
echo "replica CPU per query redis/memory by run: $cratio"
awk -v a="$(median <<<"$tratio")" -v c="$(median <<<"$cratio")" -v k="$(median <<<"${cmds[redis]}")" \
  'BEGIN {printf "throughput redis/memory: %.2f (median of the runs; goal >= 0.9)\nreplica CPU per query redis/memory: %.2f (median of the runs; goal <= 1.1)\nRedis commands sent per query: %.3f (goal <= 1)\n", a, c, k}'
