#!/usr/bin/env bash
# `cmake --install` into a temporary prefix puts nibble.h, libnibble.a and
# nibble.pc where a C user expects them, and the embedding example compiles
# against the installed copy with nothing but
# `cc embed_example.c $(pkg-config --cflags --libs nibble)` and runs.
#   install_pkgconfig.sh NIBBLE_BINARY [SHARED_DIR]   (the build directory is the binary's)
set -u
BIN=$1
SHARED=${2:-../shared}
BUILD=$(cd "$(dirname "$BIN")" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

command -v pkg-config >/dev/null || { echo "SKIP: pkg-config not installed"; exit 77; }
[ -f "$BUILD/libnibble.a" ] || cmake --build "$BUILD" --target nibble_lib >/dev/null
cmake --install "$BUILD" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1; rc=$?
check "cmake --install exits 0" '[ $rc -eq 0 ]'
check "header installed" '[ -f "$tmp/prefix/include/nibble.h" ] && [ -f "$tmp/prefix/include/nibble_status.h" ]'
lib=$(find "$tmp/prefix" -name libnibble.a | head -1)
pc=$(find "$tmp/prefix" -name nibble.pc | head -1)
check "libnibble.a installed" '[ -n "$lib" ]'
check "nibble.pc installed" '[ -n "$pc" ]'
check "nibble binary installed" '[ -x "$tmp/prefix/bin/nibble" ]'
# the installed headers include nothing outside the installed include dir
check "headers self-contained" \
  '! grep -h "#include \"" "$tmp/prefix/include/"*.h | grep -v "nibble_status.h"'
export PKG_CONFIG_PATH=$(dirname "$pc")
check "pkg-config knows the version" '[ "$(pkg-config --modversion nibble)" = "$(sed -n "s/^#define NIBBLE_VERSION \"\(.*\)\"/\1/p" "$SRC/include/nibble.h")" ]'
flags=$(pkg-config --cflags --libs nibble) || flags=
check "pkg-config --cflags --libs nibble" '[ -n "$flags" ]'
check "cflags name only the installed include dir" \
  '! pkg-config --cflags nibble | tr " " "\n" | grep -- "^-I" | grep -v "$tmp/prefix" | grep -q "$SRC"'
# the example, copied away from the source tree, built against the install
cp "$SRC/tests/embed/embed_example.c" "$tmp/"
(cd "$tmp" && ${CC:-cc} -std=c11 -Wall -Wextra -Werror -o embed embed_example.c $flags) >"$tmp/cc.log" 2>&1; rc=$?
[ $rc -eq 0 ] || cat "$tmp/cc.log"
check "example compiles and links against the installed copy" '[ $rc -eq 0 ]'
if [ $rc -eq 0 ]; then
  if [ -f "$SHARED/models/aidreams260K.gguf" ]; then
    model=$SHARED/models/aidreams260K.gguf
  else
    model=$tmp/m.gguf
    "$BIN" synth --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --ctx 256 -o "$model" >/dev/null
  fi
  "$tmp/embed" "$model" >"$tmp/out" 2>&1; rc=$?
  [ $rc -eq 0 ] || cat "$tmp/out"
  check "the installed example runs" '[ $rc -eq 0 ] && grep -q "16 tokens, finish length" "$tmp/out"'
fi
echo "$fails failed"
[ $fails -eq 0 ]
