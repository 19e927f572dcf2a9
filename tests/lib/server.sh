# Shared by tests/integration/*.sh that start `nibble serve` (source it;
# check.sh does).

# wait_ready PID LOG [listening]: waits (60 s at most) until the server
# started as PID and logging to LOG has said where it listens and answers
# /health with 200 (with "listening": only until it listens); sets PORT
# (also when it never got ready). Non-zero when the server exited or did
# not get ready in time.
wait_ready() {
  local pid=$1 log=$2 only_listening=${3:-}
  PORT=
  for _ in $(seq 1 600); do
    [ -z "$PORT" ] && PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' | head -n 1)
    [ -n "$PORT" ] && [ -n "$only_listening" ] && return 0
    [ -n "$PORT" ] && [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
