#!/usr/bin/env bash
# The output rule (issue 15, base/file.h nb_out_check / nb_out_dir_check) in
# every command that writes besides quantize and synth (harden_files.sh):
# export OUT_DIR, quantize --format hf OUT, imatrix -o, eval kld
# --save-base, eval golden --out, bench serve --out, bench compare --out.
# Each refuses an output that is an input (same device and inode) and one
# that is a device, a FIFO or the wrong kind of node, with exit 2, a message
# naming the flag, and the node left as it was; all before any model work.
set -u
BIN=$1
. "$(dirname "$0")/../lib/check.sh"
export XDG_CACHE_HOME=$tmp/cache

"$BIN" synth --arch llama --dim 64 --layers 1 --heads 4 --ffn 128 --ctx 64 -o "$tmp/a.gguf" >/dev/null 2>"$tmp/e"
check "synth writes a small model" '[ -s "$tmp/a.gguf" ]'
sum0=$(sha256sum <"$tmp/a.gguf")
same() { [ "$(sha256sum <"$tmp/a.gguf")" = "$sum0" ]; }
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 1 40) >"$tmp/text.txt"
mkfifo "$tmp/fifo"
mkdir "$tmp/adir"

# refused CMD... -> exit 2 and stderr matching all of the given regexes
refused() {
  local what=$1; shift
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  timeout 60 "$BIN" "$@" >/dev/null 2>"$tmp/e" </dev/null; local rc=$?
  local okp=1
  for p in "${pats[@]}"; do grep -q -- "$p" "$tmp/e" || okp=0; done
  check "$what: exit 2 ($rc) naming it" '[ $rc -eq 2 ] && [ $okp -eq 1 ]'
  [ $rc -eq 2 ] && [ $okp -eq 1 ] || sed 's/^/    /' "$tmp/e"
}

# ---- export IN OUT_DIR
refused "export OUT_DIR = the input file" "OUT_DIR '$tmp/a.gguf' is a regular file, not a directory" -- \
  export "$tmp/a.gguf" "$tmp/a.gguf" --format hf
check "export: the input is unchanged" same
refused "export OUT_DIR = /dev/null" "OUT_DIR '/dev/null' is a character device" -- export "$tmp/a.gguf" /dev/null --format hf
refused "export OUT_DIR = a FIFO" "OUT_DIR .* is a FIFO" -- export "$tmp/a.gguf" "$tmp/fifo" --format hf
check "export: the FIFO is still a FIFO" '[ -p "$tmp/fifo" ]'
"$BIN" export "$tmp/a.gguf" "$tmp/hf" --format hf >/dev/null 2>"$tmp/e"; rc=$?
check "export to a new OUT_DIR works" '[ $rc -eq 0 ] && [ -s "$tmp/hf/config.json" ]'
hsum=$(cat "$tmp/hf"/* | sha256sum)
refused "export OUT_DIR = the input HF directory" "OUT_DIR .* same directory as the input" -- \
  export "$tmp/hf" "$tmp/hf" --format hf
ln -s "$tmp/hf" "$tmp/hflink"
refused "export OUT_DIR = a symlink to the input directory" "same directory as the input" -- \
  export "$tmp/hf" "$tmp/hflink" --format hf
check "export: the input directory is unchanged" '[ "$(cat "$tmp/hf"/* | sha256sum)" = "$hsum" ]'
mkdir "$tmp/hf2"; mkfifo "$tmp/hf2/config.json"
refused "export: OUT_DIR/config.json is a FIFO" "config.json' is a FIFO" -- export "$tmp/a.gguf" "$tmp/hf2" --format hf
"$BIN" export "$tmp/hf" "$tmp/hf" --format hf --force >/dev/null 2>"$tmp/e"; rc=$?
check "export IN IN --force: done" '[ $rc -eq 0 ] && [ -s "$tmp/hf/config.json" ]'

# ---- quantize --format hf
refused "quantize --format hf OUT = the input HF directory" "OUT .* same directory as the input" -- \
  quantize "$tmp/hf" "$tmp/hf" --type Q8_0 --format hf
refused "quantize --format hf OUT = /dev/null" "OUT '/dev/null' is a character device" -- \
  quantize "$tmp/a.gguf" /dev/null --type Q8_0 --format hf
check "quantize --format hf: no temporary GGUF left behind" '! ls "$tmp"/*.nibble-tmp.gguf >/dev/null 2>&1'

# ---- imatrix -o
refused "imatrix -o = the model" "-o '$tmp/a.gguf' is the same file as the input" -- \
  imatrix "$tmp/a.gguf" -f "$tmp/text.txt" -o "$tmp/a.gguf"
check "imatrix: the model is unchanged" same
cp "$tmp/text.txt" "$tmp/text0.txt"
refused "imatrix -o = the text" "-o .* same file as the input" -- imatrix "$tmp/a.gguf" -f "$tmp/text.txt" -o "$tmp/text.txt"
check "imatrix: the text is unchanged" 'cmp -s "$tmp/text.txt" "$tmp/text0.txt"'
refused "imatrix -o /dev/null" "-o '/dev/null' is a character device" -- imatrix "$tmp/a.gguf" -f "$tmp/text.txt" -o /dev/null
refused "imatrix -o a directory" "-o .* is a directory" -- imatrix "$tmp/a.gguf" -f "$tmp/text.txt" -o "$tmp/adir"
refused "imatrix -o a FIFO" "-o .* is a FIFO" -- imatrix "$tmp/a.gguf" -f "$tmp/text.txt" -o "$tmp/fifo"

# ---- eval kld --save-base
refused "eval kld --save-base = the model" "--save-base .* same file as the input" -- \
  eval kld "$tmp/a.gguf" -f "$tmp/text.txt" --save-base "$tmp/a.gguf"
check "eval kld: the model is unchanged" same
refused "eval kld --save-base = the text" "--save-base .* same file as the input" -- \
  eval kld "$tmp/a.gguf" -f "$tmp/text.txt" --save-base "$tmp/text.txt"
refused "eval kld --save-base /dev/null" "--save-base '/dev/null' is a character device" -- \
  eval kld "$tmp/a.gguf" -f "$tmp/text.txt" --save-base /dev/null
refused "eval kld --save-base a directory" "--save-base .* is a directory" -- \
  eval kld "$tmp/a.gguf" -f "$tmp/text.txt" --save-base "$tmp/adir"

# ---- eval golden --out
printf '{"id":"a","bucket":"b","prompt":"hi","max_tokens":2,"check":{"contains":"x"}}\n' >"$tmp/set.jsonl"
refused "eval golden --out /dev/null" "--out '/dev/null' is a character device" -- \
  eval golden "$tmp/a.gguf" --set "$tmp/set.jsonl" --out /dev/null
refused "eval golden --out a regular file (the set)" "--out .* is a regular file, not a directory" -- \
  eval golden "$tmp/a.gguf" --set "$tmp/set.jsonl" --out "$tmp/set.jsonl"
refused "eval golden --out the model's HF directory" "--out .* same directory as the input" -- \
  eval golden "$tmp/hf" --set "$tmp/set.jsonl" --out "$tmp/hf"
mkdir "$tmp/gout"; mkfifo "$tmp/gout/items.jsonl"
refused "eval golden --out DIR with a FIFO items.jsonl" "items.jsonl' is a FIFO" -- \
  eval golden "$tmp/a.gguf" --set "$tmp/set.jsonl" --out "$tmp/gout"
mkdir "$tmp/gout2"; cp "$tmp/set.jsonl" "$tmp/gout2/items.jsonl"
refused "eval golden --set DIR/items.jsonl --out DIR" "items.jsonl' is the same file as the input" -- \
  eval golden "$tmp/a.gguf" --set "$tmp/gout2/items.jsonl" --out "$tmp/gout2"

# ---- bench serve --out / bench compare --out (refused before any request)
refused "bench serve --out /dev/null" "--out '/dev/null' is a character device" -- \
  bench serve --endpoint http://127.0.0.1:9 --out /dev/null
refused "bench serve --out a regular file" "--out .* is a regular file, not a directory" -- \
  bench serve --endpoint http://127.0.0.1:9 --out "$tmp/a.gguf"
check "bench serve: the file is unchanged" same
mkdir "$tmp/bout"; mkfifo "$tmp/bout/results.json"
refused "bench serve --out DIR with a FIFO results.json" "results.json' is a FIFO" -- \
  bench serve --endpoint http://127.0.0.1:9 --out "$tmp/bout"
mkdir "$tmp/cmp"; echo '{}' >"$tmp/cmp/compare.json"; echo '{}' >"$tmp/b.json"
refused "bench compare --out DIR holding an input as compare.json" "compare.json' is the same file as the input" -- \
  bench compare "$tmp/cmp/compare.json" "$tmp/b.json" --out "$tmp/cmp"
refused "bench compare --out /dev/null" "--out '/dev/null' is a character device" -- \
  bench compare "$tmp/b.json" "$tmp/b.json" --out /dev/null
finish
