#!/usr/bin/env bash
# nibble serve with the official `openai` npm client (pinned in
# tests/integration/clients/package.json, installed with npm into the build
# directory on first run): chat and completions, streaming and not, errors.
# Skips visibly (exit 77) when node/npm are missing or the install fails.
set -u
BIN=$1
SHARED=${2:-../shared}
HERE=$(cd "$(dirname "$0")" && pwd)
for t in node npm curl; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed (scripts/deps.sh installs nodejs + npm)"; exit 77; }
done
NPM_DIR=${NB_NPM_DIR:-$(cd "$(dirname "$BIN")" && pwd)/npm-clients}
. "$HERE/../lib/npm_client.sh"
. "$HERE/../lib/server.sh"
npm_client_setup "$NPM_DIR" "$HERE/clients/openai_client.mjs"

tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache
if [ -f "$SHARED/models/aidreams260K.gguf" ]; then M=$SHARED/models/aidreams260K.gguf; NAME=aidreams260K
else echo "SKIP: $SHARED/models not found; using the built-in default model"; M=; NAME=nibble-default; fi
KEY=npm-test-$$
NIBBLE_API_KEY=$KEY "$BIN" serve ${M:+"$M"} --port 0 --max-model-len 128 -t 2 >"$tmp/log" 2>&1 &
PID=$!
wait_ready "$PID" "$tmp/log"
if [ -z "$PORT" ]; then echo "FAIL: server did not start: $(tail -n 5 "$tmp/log")"; exit 1; fi
(cd "$NPM_DIR" && timeout 120 node openai_client.mjs "$PORT" "$KEY" "$NAME"); rc=$?
kill -TERM $PID; wait $PID; src=$?
[ $src -eq 0 ] || { echo "FAIL: server exit code $src after SIGTERM"; rc=1; }
exit $rc
