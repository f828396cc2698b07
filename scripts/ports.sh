# Sourced by the scripts that start servers on loopback (provision-redis.sh,
# provision-redis-cluster.sh, fleet-bench.sh): free ports below the kernel's
# ephemeral range. A port inside the range may be taken, between the check
# and the start, as the local port of any outgoing connection on the machine
# (and the server then never listens: "a replica once never answered
# /healthz"); below it, only another server can take it.
#
#   . "$(dirname "$0")/ports.sh"
#   port=$(free_port)                  # a free port
#   port=$(free_port 10000)            # … whose port+10000 is free too (a cluster bus)
#   port=$(free_port 0 "${used[@]}")   # … other than those picked already

# ephemeral_start prints the first port of the ephemeral range (Linux's
# default when it cannot be read).
ephemeral_start() {
  local lo _
  if read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [[ $lo =~ ^[0-9]+$ ]]; then
    echo "$lo"
  else
    echo 32768
  fi
}

# port_taken PORT: something listens on PORT on loopback.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port [OFFSET [EXCLUDED...]]: a port from 10000 up to the ephemeral
# range, free, with PORT+OFFSET free and below the range too, neither of them
# among EXCLUDED (ports picked already, whose servers may not listen yet).
free_port() {
  local offset=${1:-0} lo=10000 hi p
  shift || true
  local excluded=" $* "
  hi=$(($(ephemeral_start) - offset))
  if ((hi - lo < 100)); then
    echo "free_port: no room below the ephemeral range ($(ephemeral_start)) for offset $offset" >&2
    return 1
  fi
  for _ in $(seq 200); do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
    [[ $excluded == *" $p "* || $excluded == *" $((p + offset)) "* ]] && continue
    port_taken "$p" && continue
    ((offset > 0)) && port_taken $((p + offset)) && continue
    echo "$p"
    return 0
  done
  echo "free_port: no free port found below the ephemeral range" >&2
  return 1
}
