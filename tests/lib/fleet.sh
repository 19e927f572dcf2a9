# Sourced by the fleet tests (after check.sh, with BIN and HERE set): skips
# without HAProxy, sets FLEET (deploy/fleet.sh), D (the fleet's state
# directory), FPORT and U (HAProxy's front end), and tears the fleet down on
# exit.
FLEET=$HERE/../../deploy/fleet.sh
for t in haproxy curl python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed (scripts/deps.sh)"; exit 77; }
done
unset OPENAI_API_KEY NIBBLE_API_KEY
D=$tmp/fleet
fleet_cleanup() { bash "$FLEET" down --dir "$D" >/dev/null 2>&1; rm -rf "$tmp"; }
trap fleet_cleanup EXIT
FPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$FPORT
