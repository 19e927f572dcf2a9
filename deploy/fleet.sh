#!/usr/bin/env bash
# A fleet of `nibble serve` replicas behind HAProxy (docs/operations.md).
#
#   deploy/fleet.sh up [options] [-- extra nibble serve args]
#   deploy/fleet.sh render [options]          write and print haproxy.cfg only (remote replicas)
#   deploy/fleet.sh status [--dir DIR]
#   deploy/fleet.sh shift green|blue PCT [--dir DIR]
#   deploy/fleet.sh down [--dir DIR]
#
# Topology: a blue pool (the serving version), an optional green pool (the
# candidate) and an optional long pool (requests whose body is larger than
# --long-threshold bytes). The blue/green split is a map entry read per
# request (`green` -> percent), changed through HAProxy's runtime API
# (`set map`), so a shift takes effect for the next request, never touches a
# request in flight, and each pool keeps its own balancing (leastconn, or
# consistent hashing over the first --hash-bytes bytes of the body for
# prefix-cache affinity). Servers are checked with GET /health: a draining
# nibble answers 503 there and leaves the rotation within one check interval.
#
# The configuration is the template deploy/haproxy/nibble.cfg (or --template
# FILE): this script fills in its placeholders (addresses and ports, the
# servers of each pool, the long-pool threshold, the balance mode and the
# check interval) and writes the result to DIR/haproxy.cfg.
set -euo pipefail

FLEET_DIR=${FLEET_DIR:-./fleet}
NIBBLE=${NIBBLE:-nibble}
BIND=127.0.0.1:8000
BLUE=2 GREEN=0 LONG=0
BLUE_MODEL="" GREEN_MODEL="" LONG_MODEL=""
BLUE_SERVERS="" GREEN_SERVERS="" LONG_SERVERS=""
BALANCE=leastconn HASH_BYTES=512 HASH_FACTOR=0
LONG_THRESHOLD=16384
CHECK_INTER=500
GREEN_PCT=0
SERVE_ARGS=() LONG_ARGS=""
STATS_BIND=""
TEMPLATE=${FLEET_TEMPLATE:-$(dirname "${BASH_SOURCE[0]}")/haproxy/nibble.cfg}

die() { echo "fleet: $*" >&2; exit 2; }

usage() {
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'EOF'
options (up / render):
  --dir DIR                 state directory (default ./fleet, or $FLEET_DIR)
  --nibble BIN              the nibble binary (default: nibble on PATH, or $NIBBLE)
  --template FILE           the HAProxy config template (default deploy/haproxy/nibble.cfg,
                            or $FLEET_TEMPLATE)
  --bind ADDR:PORT          HAProxy's front end (default 127.0.0.1:8000)
  --blue N | --green N | --long N        replicas started here per pool (default 2 / 0 / 0)
  --blue-model P | --green-model P | --long-model P   model per pool (default: the built-in model)
  --blue-servers H:P,...  (also --green-servers, --long-servers)   replicas already running elsewhere
                            (across machines: not started, only put in the config)
  --balance leastconn|hash  per-pool algorithm (default leastconn); hash = prefix affinity:
                            balance hash req.body,bytes(0,HASH_BYTES) with hash-type consistent
  --hash-bytes N            bytes of the body hashed (default 512)
  --hash-balance-factor F   bounded loads for hash (e.g. 150; default 0 = off)
  --long-threshold BYTES    bodies above this go to the long pool (default 16384; 1..65536:
                            HAProxy measures the body it buffered, at most tune.bufsize)
  --check-inter MS          health-check interval (default 500)
  --green-pct P             initial share of the green pool (default 0)
  --long-args "ARGS"        extra nibble serve args for the long pool (e.g. a larger --max-model-len)
  --stats-bind ADDR:PORT    HAProxy stats page (/stats) and Prometheus exporter (/metrics)
  -- ARGS                   extra args for every nibble serve replica
EOF
}

parse() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) FLEET_DIR=$2; shift 2 ;;
      --nibble) NIBBLE=$2; shift 2 ;;
      --template) TEMPLATE=$2; shift 2 ;;
      --bind) BIND=$2; shift 2 ;;
      --blue) BLUE=$2; shift 2 ;;
      --green) GREEN=$2; shift 2 ;;
      --long) LONG=$2; shift 2 ;;
      --blue-model) BLUE_MODEL=$2; shift 2 ;;
      --green-model) GREEN_MODEL=$2; shift 2 ;;
      --long-model) LONG_MODEL=$2; shift 2 ;;
      --blue-servers) BLUE_SERVERS=$2; shift 2 ;;
      --green-servers) GREEN_SERVERS=$2; shift 2 ;;
      --long-servers) LONG_SERVERS=$2; shift 2 ;;
      --balance) BALANCE=$2; shift 2 ;;
      --hash-bytes) HASH_BYTES=$2; shift 2 ;;
      --hash-balance-factor) HASH_FACTOR=$2; shift 2 ;;
      --long-threshold) LONG_THRESHOLD=$2; shift 2 ;;
      --check-inter) CHECK_INTER=$2; shift 2 ;;
      --green-pct) GREEN_PCT=$2; shift 2 ;;
      --long-args) LONG_ARGS=$2; shift 2 ;;
      --stats-bind) STATS_BIND=$2; shift 2 ;;
      --) shift; SERVE_ARGS=("$@"); break ;;
      -h|--help) usage; exit 0 ;;
      *) die "unknown option '$1' (see deploy/fleet.sh --help)" ;;
    esac
  done
  local n
  for n in "$BLUE" "$GREEN" "$LONG" "$HASH_BYTES" "$HASH_FACTOR" "$LONG_THRESHOLD" "$CHECK_INTER" "$GREEN_PCT"; do
    [[ "$n" =~ ^[0-9]+$ ]] || die "'$n' is not a non-negative integer"
  done
  [ "$GREEN_PCT" -le 100 ] || die "--green-pct $GREEN_PCT: allowed 0..100"
  [ "$HASH_BYTES" -ge 16 ] || die "--hash-bytes $HASH_BYTES: allowed >= 16"
  [ "$CHECK_INTER" -ge 100 ] || die "--check-inter $CHECK_INTER: allowed >= 100 ms"
  # req.body_size sees what option http-buffer-request buffered: at most
  # tune.bufsize (131072) less the headers and HAProxy's reserve
  [ "$LONG_THRESHOLD" -ge 1 ] && [ "$LONG_THRESHOLD" -le 65536 ] ||
    die "--long-threshold $LONG_THRESHOLD: allowed 1..65536 bytes (HAProxy measures the buffered body)"
  case "$BALANCE" in leastconn|hash) ;; *) die "--balance '$BALANCE': allowed leastconn, hash" ;; esac
  [[ "$BIND" == *:* ]] || die "--bind '$BIND': expected ADDR:PORT"
}

# ---- runtime API (the stats socket, admin level, mode 600) ------------------------
rt() {
  python3 - "$FLEET_DIR/haproxy.sock" "$1" <<'PY'
import socket, sys, time
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
sys.stdout.write(out.decode(errors="replace"))
sys.stderr.write("%.1f\n" % ((time.monotonic() - t0) * 1000))  # the runtime API's round trip, ms
PY
}

# ---- replicas ----------------------------------------------------------------------
start_replica() { # name model extra-args
  local name=$1 model=$2 extra=$3 log="$FLEET_DIR/$1.log" port="" pid
  # shellcheck disable=SC2086
  "$NIBBLE" serve ${model:+"$model"} --host 127.0.0.1 --port 0 --served-model-name nibble "${SERVE_ARGS[@]}" $extra \
    >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [ -z "$port" ] && port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' | head -n 1 || true)
    grep -q "ready:" "$log" && [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ] || ! kill -0 "$pid" 2>/dev/null || ! grep -q "ready:" "$log"; then
    echo "fleet: replica $name did not become ready: $(tail -n 3 "$log")" >&2
    kill -9 "$pid" 2>/dev/null || true
    return 1
  fi
  echo "$name $pid 127.0.0.1:$port" >>"$FLEET_DIR/replicas"
  echo "127.0.0.1:$port"
}

# servers_of POOL-PREFIX COUNT MODEL EXTRA REMOTE-LIST -> lines "name addr"
servers_of() {
  local pfx=$1 count=$2 model=$3 extra=$4 remote=$5 i addr
  if [ "$MODE" = up ]; then
    for i in $(seq 1 "$count"); do
      addr=$(start_replica "$pfx$i" "$model" "$extra") || return 1
      echo "$pfx$i $addr"
    done
  fi
  i=0
  for addr in ${remote//,/ }; do
    i=$((i + 1))
    echo "${pfx}r$i $addr"
  done
}

# server_lines "name addr" lines -> HAProxy server lines
server_lines() {
  local n a
  while read -r n a; do
    [ -n "$n" ] && echo "    server $n $a"
  done <<<"$1"
}

# fill_template FILE: prints FILE with {{NAME}} replaced by $T_NAME and the
# lines between "#@if COND" and "#@end" kept only when $IF_COND is 1 (both
# from the environment; see the template's head). Exit 2 naming the line on
# an unknown placeholder or condition, or unbalanced #@if / #@end.
fill_template() {
  awk '
    function fail(m) { printf "fleet: %s:%d: %s\n", FILENAME, FNR, m > "/dev/stderr"; bad = 1; exit 2 }
    BEGIN { keep = 1; depth = 0 }
    /^##/ { next }
    /^#@if / {
      c = $2
      if (NF != 2 || !(("IF_" c) in ENVIRON)) fail("unknown condition \"" $0 "\"")
      stack[++depth] = keep
      keep = keep && ENVIRON["IF_" c] == "1"
      next
    }
    /^#@end[[:space:]]*$/ { if (depth == 0) fail("#@end without #@if"); keep = stack[depth--]; next }
    /^#@/ { fail("unknown directive \"" $0 "\"") }
    !keep { next }
    {
      line = $0; out = ""
      while (match(line, /\{\{[A-Z_]+\}\}/)) {
        name = substr(line, RSTART + 2, RLENGTH - 4)
        if (!(("T_" name) in ENVIRON)) fail("unknown placeholder {{" name "}}")
        out = out substr(line, 1, RSTART - 1) ENVIRON["T_" name]
        line = substr(line, RSTART + RLENGTH)
      }
      line = out line
      if (index(line, "{{") || index(line, "}}")) fail("malformed placeholder in \"" $0 "\"")
      print line
    }
    END {
      if (bad) exit 2
      if (depth) { printf "fleet: %s: %d #@if without #@end\n", FILENAME, depth > "/dev/stderr"; exit 2 }
    }' "$1"
}

render() { # blue-lines green-lines long-lines
  local blue=$1 green=$2 long=$3 b01 h01 f01 g01 l01 s01
  b01=0; h01=0; f01=0; g01=0; l01=0; s01=0
  if [ "$BALANCE" = hash ]; then h01=1; [ "$HASH_FACTOR" -gt 0 ] && f01=1; else b01=1; fi
  [ -n "$green" ] && g01=1
  [ -n "$long" ] && l01=1
  [ -n "$STATS_BIND" ] && s01=1
  [ -r "$TEMPLATE" ] || die "--template $TEMPLATE: not a readable file"
  IF_leastconn=$b01 IF_hash=$h01 IF_hash_factor=$f01 IF_green=$g01 IF_long=$l01 IF_stats=$s01 \
  T_STATE_DIR=$FLEET_DIR T_BIND=$BIND T_STATS_BIND=$STATS_BIND T_CHECK_INTER=$CHECK_INTER \
  T_HASH_BYTES=$HASH_BYTES T_HASH_FACTOR=$HASH_FACTOR T_LONG_THRESHOLD=$LONG_THRESHOLD \
  T_BLUE_SERVERS=$(server_lines "$blue") T_GREEN_SERVERS=$(server_lines "$green") \
  T_LONG_SERVERS=$(server_lines "$long") \
    fill_template "$TEMPLATE"
}

# The template must fill in with every section on before any replica starts.
check_template() {
  local saved_balance=$BALANCE saved_stats=$STATS_BIND saved_factor=$HASH_FACTOR
  [ -r "$TEMPLATE" ] || die "--template $TEMPLATE: not a readable file"
  BALANCE=hash STATS_BIND=127.0.0.1:1 HASH_FACTOR=150
  render "x 127.0.0.1:1" "x 127.0.0.1:1" "x 127.0.0.1:1" >/dev/null || die "--template $TEMPLATE: cannot be filled in"
  BALANCE=leastconn
  render "x 127.0.0.1:1" "" "" >/dev/null || die "--template $TEMPLATE: cannot be filled in"
  BALANCE=$saved_balance STATS_BIND=$saved_stats HASH_FACTOR=$saved_factor
}

cmd_up() {
  mkdir -p "$FLEET_DIR"
  FLEET_DIR=$(cd "$FLEET_DIR" && pwd)
  check_template
  if [ "$MODE" = up ]; then
    command -v haproxy >/dev/null || die "haproxy is not installed (scripts/deps.sh)"
    [ -f "$FLEET_DIR/haproxy.pid" ] && kill -0 "$(cat "$FLEET_DIR/haproxy.pid")" 2>/dev/null &&
      die "a fleet is already up in $FLEET_DIR (deploy/fleet.sh down first)"
    : >"$FLEET_DIR/replicas"
  fi
  local blue green long
  blue=$(servers_of b "$BLUE" "$BLUE_MODEL" "" "$BLUE_SERVERS") || { cmd_down; exit 1; }
  green=$(servers_of g "$GREEN" "$GREEN_MODEL" "" "$GREEN_SERVERS") || { cmd_down; exit 1; }
  long=$(servers_of l "$LONG" "$LONG_MODEL" "$LONG_ARGS" "$LONG_SERVERS") || { cmd_down; exit 1; }
  [ -n "$blue" ] || die "the blue pool is empty (--blue N or --blue-servers)"
  echo "green $GREEN_PCT" >"$FLEET_DIR/split.map"
  render "$blue" "$green" "$long" >"$FLEET_DIR/haproxy.cfg" || { cmd_down; die "--template $TEMPLATE: cannot be filled in"; }
  if command -v haproxy >/dev/null; then
    haproxy -c -q -f "$FLEET_DIR/haproxy.cfg" || { cmd_down; die "haproxy rejected $FLEET_DIR/haproxy.cfg (from $TEMPLATE)"; }
  else
    echo "fleet: haproxy is not installed here: $FLEET_DIR/haproxy.cfg was not checked (haproxy -c)" >&2
  fi
  if [ "$MODE" = render ]; then
    cat "$FLEET_DIR/haproxy.cfg"
    return 0
  fi
  haproxy -D -p "$FLEET_DIR/haproxy.pid" -f "$FLEET_DIR/haproxy.cfg" || { cmd_down; die "haproxy did not start"; }
  for _ in $(seq 1 50); do [ -S "$FLEET_DIR/haproxy.sock" ] && break; sleep 0.1; done
  echo "fleet: up on http://$BIND (blue $(wc -l <<<"$blue"), green $([ -n "$green" ] && wc -l <<<"$green" || echo 0), long $([ -n "$long" ] && wc -l <<<"$long" || echo 0); $BALANCE; green ${GREEN_PCT}%)"
}

cmd_status() {
  [ -S "$FLEET_DIR/haproxy.sock" ] || die "no fleet in $FLEET_DIR (no runtime socket)"
  echo "split: $(rt "show map $FLEET_DIR/split.map" 2>/dev/null | awk 'NF >= 3 {print $2" "$3"%"}' | grep . || echo "green 0%")"
  rt "show stat" 2>/dev/null | python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.strip())]
h = rows[0]; h[0] = h[0].lstrip("# ")
for r in rows[1:]:
    d = dict(zip(h, r))
    if d["svname"] in ("FRONTEND", "BACKEND"): continue
    print("%-9s %-6s %-6s weight %-4s in-flight %-4s total %-6s check %s" % (d["pxname"], d["svname"], d["status"],
          d["weight"], d["scur"], d["stot"], d.get("check_status", "")))'
  if [ -f "$FLEET_DIR/replicas" ]; then
    while read -r n p a; do
      printf '%-6s pid %-7s %s /health %s\n' "$n" "$p" "$a" "$(curl -s -m 2 "http://$a/health" || echo unreachable)"
    done <"$FLEET_DIR/replicas"
  fi
}

cmd_shift() {
  local color=${1:-} pct=${2:-} g
  [[ "$pct" =~ ^[0-9]+$ ]] && [ "$pct" -le 100 ] || die "shift: PCT must be 0..100 (got '$pct')"
  case "$color" in green) g=$pct ;; blue) g=$((100 - pct)) ;; *) die "shift: COLOR must be green or blue" ;; esac
  [ -S "$FLEET_DIR/haproxy.sock" ] || die "no fleet in $FLEET_DIR (no runtime socket)"
  local out ms
  out=$(rt "set map $FLEET_DIR/split.map green $g" 2>"$FLEET_DIR/.rt_ms")
  ms=$(cat "$FLEET_DIR/.rt_ms")
  [ -z "$(tr -d '[:space:]' <<<"$out")" ] || die "runtime API: $out"
  echo "green $g" >"$FLEET_DIR/split.map" # a restart keeps the split
  echo "fleet: green ${g}%, blue $((100 - g))% (runtime API: $ms ms)"
}

cmd_down() {
  if [ -f "$FLEET_DIR/replicas" ]; then
    local n p a pids=()
    while read -r n p a; do kill -TERM "$p" 2>/dev/null && pids+=("$p"); done <"$FLEET_DIR/replicas"
    for p in "${pids[@]}"; do
      for _ in $(seq 1 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$p" 2>/dev/null || true
    done
    rm -f "$FLEET_DIR/replicas"
  fi
  if [ -f "$FLEET_DIR/haproxy.pid" ]; then
    kill "$(cat "$FLEET_DIR/haproxy.pid")" 2>/dev/null || true
    rm -f "$FLEET_DIR/haproxy.pid"
  fi
  return 0
}

MODE=${1:-}
[ $# -gt 0 ] && shift
case "$MODE" in
  up|render) parse "$@"; cmd_up ;;
  status) parse "$@"; cmd_status ;;
  shift) c=${1:-}; p=${2:-}; shift $(( $# < 2 ? $# : 2 )); parse "$@"; cmd_shift "$c" "$p" ;;
  down) parse "$@"; cmd_down; echo "fleet: down" ;;
  -h|--help|help|"") usage; [ -n "$MODE" ] ;;
  *) die "unknown command '$MODE' (up, render, status, shift, down)" ;;
esac
