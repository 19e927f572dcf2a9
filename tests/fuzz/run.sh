#!/usr/bin/env bash
# Runs the libFuzzer targets for a bounded time over a scratch copy of the
# seed corpus (tests/fuzz/corpus/<target>/, never modified) and fails when a
# crash, leak, timeout or out-of-memory is found (the reproducer is left in
# BUILD_DIR/fuzz-artifacts/).
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail
BUILD=${1:?usage: run.sh BUILD_DIR SECONDS}
SECONDS_EACH=${2:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
ART="$BUILD/fuzz-artifacts"
mkdir -p "$ART"
status=0
ran=0
for bin in "$BUILD"/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    target=${name#fuzz_}
    work=$(mktemp -d)
    if [ -d "$HERE/corpus/$target" ]; then cp -r "$HERE/corpus/$target/." "$work/"; fi
    echo "fuzz: $name for ${SECONDS_EACH}s over $(ls "$work" | wc -l) seeds"
    if ! "$bin" "$work" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
        -artifact_prefix="$ART/$name-" -print_final_stats=1 2>"$ART/$name.log"; then
        echo "fuzz: $name FOUND A FAILURE; reproducer and log in $ART:" >&2
        tail -40 "$ART/$name.log" >&2
        status=1
    else
        grep -E "stat::number_of_executed_units|cov:" "$ART/$name.log" | tail -2 || true
    fi
    rm -rf "$work"
    ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
    echo "fuzz: no fuzz_* binaries in $BUILD (configure with CC=clang -DNB_FUZZ=ON)" >&2
    exit 1
fi
exit $status
