#!/usr/bin/env bash
# Fleet benchmark (SPEC 11, issue 14): 3 replicas of the built aggregator
# behind haproxy (round robin), over portalsim portals at 5 ms, loaded by wrk
# with a random valid plate per request; once with each replica on its own
# state, once sharing a Redis of the benchmark's own. Prints, for each:
# throughput, replica CPU per query (the three replicas' user+system time
# from /proc/<pid>/stat over the requests), Redis CPU and commands per query
# (INFO commandstats delta), and the calls a portal receives after it dies
# under load (portalsim's counter, from the moment it goes down to the end).
# Then the ratios of SPEC 11's goals: throughput with Redis ≥ 0.9× without,
# Redis commands per query ≤ 1, replica CPU per query with Redis ≤ 1.1×.
#
# Installs haproxy, wrk and redis-server (Debian) when missing. Everything
# binds to loopback on free ports and is stopped on exit.
#   scripts/fleet-bench.sh            # DUR=10s PORTALS=6 RUNS=1 CONNS=64
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

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" >/dev/null &
redis_pid=$!
pids+=($redis_pid)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done

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
# sets replica_pids and lb_url.
fleet() {
  local mode=$1 store="" ports=() i port
  [[ $mode == redis ]] && store="store: {redis_url: \"redis://127.0.0.1:$rport/0\", key_prefix: \"bench-$$:\"}"
  replica_pids=()
  for i in 1 2 3; do
    port=$(free_port)
    cat >"$work/agg-$mode-$i.yaml" <<EOF
server: {listen: "127.0.0.1:$port", admin_token: bench-admin}
problems: {base_uri: "https://problems.test/"}
$store
defaults: {timeout: 2s, retry: {max_retries: 0}}
$(cat "$work/sources.yaml")
EOF
    "$work/aggregator" -config "$work/agg-$mode-$i.yaml" -log-level warn >"$work/agg-$mode-$i.log" 2>&1 &
    pids+=($!); replica_pids+=($!); ports+=("$port")
  done
  local lb
  lb=$(free_port)
  {
    printf 'global\n  maxconn 4096\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n'
    printf 'frontend fleet\n  bind 127.0.0.1:%s\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n  http-reuse always\n' "$lb"
    for i in 0 1 2; do printf '  server r%d 127.0.0.1:%s\n' "$i" "${ports[$i]}"; done
  } >"$work/haproxy-$mode.cfg"
  haproxy -f "$work/haproxy-$mode.cfg" -db >"$work/haproxy-$mode.log" 2>&1 &
  pids+=($!); lb_pid=$!
  for port in "${ports[@]}"; do wait_http "http://127.0.0.1:$port/healthz"; done
  lb_url="http://127.0.0.1:$lb"
  wait_http "$lb_url/healthz"
  curl -s "$lb_url/v1/infractions?domain=AB123CD" | grep -q '"complete":true' ||
    { echo "$mode: the first query is not complete" >&2; exit 1; }
}

stop_fleet() {
  kill "${replica_pids[@]}" "$lb_pid" 2>/dev/null || true
  wait "${replica_pids[@]}" "$lb_pid" 2>/dev/null || true
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

declare -A rps cpu rcpu cmds allcmds dead
# measure MODE: one wrk run against the fleet, with the CPU and commands
# it cost.
measure() {
  local mode=$1 t0=() t1=() r0 r1 c0 c1 a0 a1 out reqs i sum=0
  for p in "${replica_pids[@]}"; do t0+=("$(ticks "$p")"); done
  r0=$(ticks "$redis_pid"); read -r c0 a0 < <(commands)
  out=$(wrk -t2 -c"$conns" -d"$dur" -s "$work/plates.lua" "$lb_url/v1/infractions")
  for p in "${replica_pids[@]}"; do t1+=("$(ticks "$p")"); done
  r1=$(ticks "$redis_pid"); read -r c1 a1 < <(commands)
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  for i in 0 1 2; do sum=$((sum + t1[i] - t0[i])); done
  rps[$mode]+="$(awk '/Requests\/sec/ {print $2}' <<<"$out") "
  cpu[$mode]+="$(awk -v d="$sum" -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.0f", d / hz * 1e6 / n}') "
  rcpu[$mode]+="$(awk -v d=$((r1 - r0)) -v hz="$hz" -v n="$reqs" 'BEGIN {printf "%.1f", d / hz * 1e6 / n}') "
  cmds[$mode]+="$(awk -v d=$((c1 - c0)) -v n="$reqs" 'BEGIN {printf "%.3f", d / n}') "
  allcmds[$mode]+="$(awk -v d=$((a1 - a0)) -v n="$reqs" 'BEGIN {printf "%.3f", d / n}') "
  grep -q 'Non-2xx' <<<"$out" && echo "  $mode: $(grep 'Non-2xx' <<<"$out")" >&2
  echo "  $mode: $(awk '/Requests\/sec/ {print $2}' <<<"$out") req/s, $reqs requests" >&2
}

# kill_portal MODE: portal p1 dies 2s into a load; counts the calls it
# receives from then to the end of the load.
kill_portal() {
  local mode=$1 n0 n1
  total() { grep -o '"total":[0-9]*' | cut -d: -f2; }
  curl -sf -X PUT -d '{"mode":"slow","latency":"5ms"}' "$p1/_sim/fault" >/dev/null
  wrk -t2 -c"$conns" -d6s -s "$work/plates.lua" "$lb_url/v1/infractions" >/dev/null &
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

for mode in memory redis; do
  echo "fleet of 3 replicas, $mode state:" >&2
  fleet "$mode"
  wrk -t2 -c"$conns" -d2s -s "$work/plates.lua" "$lb_url/v1/infractions" >/dev/null # warm-up
  for _ in $(seq "$runs"); do measure "$mode"; done
  kill_portal "$mode"
  stop_fleet
  if [[ $mode == redis ]]; then
    echo "  Redis commands of the whole benchmark, most called first:" >&2
    redis-cli -p "$rport" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ {print "    " $3 "\t" $1 "\t" $7 " us/call"}' |
      sort -rn | head -6 >&2
  fi
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "load avg: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $portals portals at 5ms; wrk -t2 -c$conns -d$dur; runs $runs"
for mode in memory redis; do
  printf '%-6s  %8s req/s  replica CPU %5s us/query  Redis CPU %5s us/query  Redis commands %6s /query sent (%s with those inside scripts)  dead portal got %s calls\n' \
    "$mode" "$(median <<<"${rps[$mode]}")" "$(median <<<"${cpu[$mode]}")" "$(median <<<"${rcpu[$mode]}")" \
    "$(median <<<"${cmds[$mode]}")" "$(median <<<"${allcmds[$mode]}")" "${dead[$mode]}"
done
awk -v a="$(median <<<"${rps[redis]}")" -v b="$(median <<<"${rps[memory]}")" \
  -v c="$(median <<<"${cpu[redis]}")" -v d="$(median <<<"${cpu[memory]}")" -v k="$(median <<<"${cmds[redis]}")" \
  'BEGIN {printf "throughput redis/memory: %.2f (goal >= 0.9)\nreplica CPU per query redis/memory: %.2f (goal <= 1.1)\nRedis commands sent per query: %.3f (goal <= 1)\n", a/b, c/d, k}'
