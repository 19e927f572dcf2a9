# Shared by tests/integration/*.sh (source it): pass/fail counters, checks,
# a temporary directory removed on exit, and the closing "N passed, N failed"
# line that CI reads.
#   check "what is checked" 'shell condition'
#   finish            # prints the counts; exit status 0 only when nothing failed
#   skip_rest "why"   # shared/ lacks what the rest needs: exit 77 (ctest
#                     # "skipped") when nothing failed so far, else 1
passes=0
fails=0
ok() { passes=$((passes + 1)); echo "ok: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL: $*"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
skip_rest() {
  echo "SKIP: $*"
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ] && exit 77
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "${BASH_SOURCE[0]}")/server.sh" # wait_ready
