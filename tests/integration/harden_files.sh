#!/usr/bin/env bash
# Output files and bad inputs from the command line (issue 15): quantize and
# synth refuse an OUT that is the input (same device and inode: the path
# itself, a symlink, a hard link) or not a regular file (FIFO, directory),
# leaving it untouched, unless --force; the write is fsync'ed before and
# after the rename (checked with strace when installed); a file with a bad
# GGUF magic is explained as neither GGUF nor llama2.c.
set -u
BIN=$1
SHARED=${2:-../shared}
. "$(dirname "$0")/../lib/check.sh"
export XDG_CACHE_HOME=$tmp/cache

"$BIN" synth --arch llama --dim 64 --layers 1 --heads 4 --ffn 128 --ctx 64 -o "$tmp/a.gguf" >/dev/null 2>"$tmp/e"
check "synth writes a small model" '[ -s "$tmp/a.gguf" ]'
chmod 0444 "$tmp/a.gguf"
sum0=$(sha256sum <"$tmp/a.gguf")

"$BIN" quantize "$tmp/a.gguf" "$tmp/a.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize IN IN: exit 2 naming the same file" '[ $rc -eq 2 ] && grep -q "same file as the input" "$tmp/e"'
check "quantize IN IN: the input is unchanged, still read-only" \
  '[ "$(sha256sum <"$tmp/a.gguf")" = "$sum0" ] && [ "$(stat -c %a "$tmp/a.gguf")" = 444 ]'
ln -s "$tmp/a.gguf" "$tmp/link.gguf"
"$BIN" quantize "$tmp/a.gguf" "$tmp/link.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize IN symlink-to-IN: exit 2" '[ $rc -eq 2 ] && [ -L "$tmp/link.gguf" ]'
ln "$tmp/a.gguf" "$tmp/hard.gguf"
"$BIN" quantize "$tmp/hard.gguf" "$tmp/a.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize hard-link IN: exit 2" '[ $rc -eq 2 ] && [ "$(sha256sum <"$tmp/a.gguf")" = "$sum0" ]'
mkfifo "$tmp/fifo"
"$BIN" quantize "$tmp/a.gguf" "$tmp/fifo" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize OUT = a FIFO: exit 2, still a FIFO" '[ $rc -eq 2 ] && grep -q "FIFO" "$tmp/e" && [ -p "$tmp/fifo" ]'
mkdir "$tmp/dir"
"$BIN" synth --arch llama --dim 64 --layers 1 --heads 4 --ffn 128 -o "$tmp/dir" >/dev/null 2>"$tmp/e"; rc=$?
check "synth -o a directory: exit 2 naming it" '[ $rc -eq 2 ] && grep -q "directory" "$tmp/e"'
"$BIN" synth --arch llama --dim 64 --layers 1 --heads 4 --ffn 128 --vocab-from "$tmp/a.gguf" -o "$tmp/hard.gguf" >/dev/null 2>"$tmp/e"; rc=$?
check "synth -o the --vocab-from file (hard link): exit 2" '[ $rc -eq 2 ] && [ "$(sha256sum <"$tmp/a.gguf")" = "$sum0" ]'
cp "$tmp/a.gguf" "$tmp/b.gguf"; chmod 0644 "$tmp/b.gguf"
"$BIN" quantize "$tmp/b.gguf" "$tmp/b.gguf" --type Q8_0 --force >/dev/null 2>"$tmp/e"; rc=$?
check "quantize IN IN --force: done (exit 0) and the file changed" '[ $rc -eq 0 ] && [ "$(sha256sum <"$tmp/b.gguf")" != "$sum0" ]'
"$BIN" quantize "$tmp/a.gguf" "$tmp/c.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize to a new OUT works" '[ $rc -eq 0 ] && [ -s "$tmp/c.gguf" ]'
"$BIN" quantize "$tmp/a.gguf" "$tmp/c.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
check "quantize over an existing unrelated OUT works" '[ $rc -eq 0 ]'

if command -v strace >/dev/null && strace -f -o "$tmp/st" -e trace=fsync,rename,renameat,renameat2 true 2>/dev/null; then
  strace -f -o "$tmp/st" -e trace=openat,fsync,rename,renameat,renameat2 "$BIN" quantize "$tmp/a.gguf" "$tmp/d.gguf" --type Q8_0 >/dev/null 2>&1
  check "the output is fsync'ed, renamed into place, then its directory fsync'ed" 'python3 - "$tmp/st" "$tmp" <<"PY"
import re, sys
ev = []
for l in open(sys.argv[1]):
    if "fsync(" in l and "= 0" in l: ev.append("fsync")
    elif re.search(r"rename(at2?)?\(.*d\.gguf\"", l) and "= 0" in l: ev.append("rename")
i = ev.index("rename")
assert "fsync" in ev[:i] and "fsync" in ev[i + 1:], ev
PY'
else
  echo "SKIP: strace not usable; fsync order not checked"
fi

printf 'GGUX\003\000\000\000 and then some bytes that are not a model at all' >"$tmp/bad.gguf"
"$BIN" generate -m "$tmp/bad.gguf" -p hi -n 1 >/dev/null 2>"$tmp/e"; rc=$?
check "bad GGUF magic: exit 2, 'not a GGUF file (magic ...), and not a llama2.c checkpoint because ...'" \
  '[ $rc -eq 2 ] && grep -q "not a GGUF file (magic .GGUX." "$tmp/e" && grep -q "and not a llama2.c checkpoint because" "$tmp/e"'
printf 'GG' >"$tmp/tiny.bin"
"$BIN" generate -m "$tmp/tiny.bin" -p hi -n 1 >/dev/null 2>"$tmp/e"; rc=$?
check "a 2-byte file: exit 2, says it has no magic" '[ $rc -eq 2 ] && grep -q "no 4-byte magic" "$tmp/e"'
finish
