#!/usr/bin/env bash
# Runs the libFuzzer targets for a bounded time over a scratch copy of the
# seed corpus (tests/fuzz/corpus/<target>/, never modified) and fails when a
# crash, leak, timeout or out-of-memory is found (the reproducer is left in
# BUILD_DIR/fuzz-artifacts/). Each target is one single-threaded process, so
# JOBS of them (default: the number of CPUs) run at once; every target still
# gets its SECONDS of its own.
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS [JOBS]
set -euo pipefail
BUILD=${1:?usage: run.sh BUILD_DIR SECONDS [JOBS]}
SECONDS_EACH=${2:-60}
JOBS=${3:-$(nproc)}
case $JOBS in
    '' | *[!0-9]* | 0) echo "fuzz: JOBS '$JOBS': expected a whole number of targets at a time, 1 or more" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
ART="$BUILD/fuzz-artifacts"
mkdir -p "$ART"

# fuzz_one BIN: one target; its summary goes to $ART/<name>.summary, and
# $ART/<name>.failed exists when it found a failure.
fuzz_one() {
    local bin=$1 name target work rc=0
    name=$(basename "$bin")
    target=${name#fuzz_}
    work=$(mktemp -d)
    if [ -d "$HERE/corpus/$target" ]; then cp -r "$HERE/corpus/$target/." "$work/"; fi
    {
        echo "fuzz: $name for ${SECONDS_EACH}s over $(ls "$work" | wc -l) seeds"
        if ! "$bin" "$work" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
            -artifact_prefix="$ART/$name-" -print_final_stats=1 2>"$ART/$name.log"; then
            echo "fuzz: $name FOUND A FAILURE; reproducer and log in $ART:"
            tail -40 "$ART/$name.log"
            rc=1
        else
            grep -E "stat::number_of_executed_units|cov:" "$ART/$name.log" | tail -2 || true
        fi
    } >"$ART/$name.summary"
    rm -rf "$work"
    if [ $rc -ne 0 ]; then touch "$ART/$name.failed"; fi
}

bins=()
for bin in "$BUILD"/fuzz_*; do
    [ -x "$bin" ] && [ -f "$bin" ] && bins+=("$bin")
done
if [ ${#bins[@]} -eq 0 ]; then
    echo "fuzz: no fuzz_* binaries in $BUILD (configure with CC=clang -DNB_FUZZ=ON)" >&2
    exit 1
fi

rm -f "$ART"/*.failed
for bin in "${bins[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    fuzz_one "$bin" &
done
wait
status=0
for bin in "${bins[@]}"; do
    name=$(basename "$bin")
    if [ -e "$ART/$name.failed" ]; then
        cat "$ART/$name.summary" >&2
        status=1
    else
        cat "$ART/$name.summary"
    fi
done
exit $status
