# The pinned `openai` npm client for the integration tests, installed once
# per directory (npm only for test clients).
# usage: npm_client_setup DIR FILE... -> DIR holds package.json, FILE... and
# node_modules; exits 77 (skip) when npm cannot install it.
npm_client_setup() {
  local dir=$1 here
  shift
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../integration" && pwd)
  mkdir -p "$dir"
  cp "$here/clients/package.json" "$@" "$dir/"
  if [ ! -f "$dir/node_modules/openai/package.json" ] || ! cmp -s "$here/clients/package.json" "$dir/.installed"; then
    if ! (cd "$dir" && timeout 300 npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
      echo "SKIP: npm install of the pinned openai client failed: $(tail -n 3 "$dir/npm.log")"
      exit 77
    fi
    cp "$here/clients/package.json" "$dir/.installed"
  fi
}
