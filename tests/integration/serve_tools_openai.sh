#!/usr/bin/env bash
# Tool calls with the official `openai` npm client (clients/openai_tools.mjs;
# the client pinned in clients/package.json, installed into the build
# directory on first run) on the built-in random-weight model. Skips
# visibly (exit 77) when node/npm are missing or the install fails.
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
for t in node npm curl; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed (scripts/deps.sh installs nodejs + npm)"; exit 77; }
done
# a directory of its own: serve_openai.sh may be installing into npm-clients at the same time
NPM_DIR=${NB_NPM_DIR_TOOLS:-$(cd "$(dirname "$BIN")" && pwd)/npm-clients-tools}
. "$HERE/../lib/npm_client.sh"
. "$HERE/../lib/server.sh"
npm_client_setup "$NPM_DIR" "$HERE/clients/openai_tools.mjs"
tmp=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache
KEY=tools-test-$$
NIBBLE_API_KEY=$KEY "$BIN" serve --port 0 --max-model-len 512 >"$tmp/log" 2>&1 &
PID=$!
wait_ready "$PID" "$tmp/log"
if [ -z "$PORT" ]; then echo "FAIL: server did not start: $(tail -n 5 "$tmp/log")"; exit 1; fi
(cd "$NPM_DIR" && timeout 300 node openai_tools.mjs "$PORT" "$KEY" nibble-default); rc=$?
kill -TERM $PID; wait $PID; src=$?
PID=
[ $src -eq 0 ] || { echo "FAIL: server exit code $src after SIGTERM"; rc=1; }
exit $rc
