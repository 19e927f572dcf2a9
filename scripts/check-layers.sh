#!/usr/bin/env bash
# Fails when an #include goes against the layer order of docs/design.md:
#   base formats template quant kernels model tokenizer plan engine eval server
# A subsystem may include its own headers and those of the layers before it.
# src/bench (the HTTP load client) may use base only; src/cli and src/api.c
# (the public API) may use anything; include/nibble.h is for src/api.c and
# src/cli only (nibble_status.h, its vocabulary part, is for everyone).
# tests/unit/<subsystem>/ follows its subsystem's rule.
#   usage: scripts/check-layers.sh [REPO_ROOT]
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
LAYERS=(base formats template quant kernels model tokenizer plan engine eval server)
rank() {
  local i
  for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0
checked=0
while IFS= read -r f; do
  case "$f" in
    src/api.c|src/cli/*) continue ;;
    src/*) sub=${f#src/}; sub=${sub%%/*} ;;
    tests/unit/*) sub=${f#tests/unit/}; sub=${sub%%/*} ;;
  esac
  if [ "$sub" = bench ]; then me=bench; else me=$(rank "$sub"); fi
  if [ "$me" = -1 ]; then
    echo "check-layers: $f: '$sub' is not a layer of docs/design.md (add it to scripts/check-layers.sh)"
    bad=$((bad + 1))
    continue
  fi
  while IFS=: read -r line inc; do
    checked=$((checked + 1))
    case "$inc" in
      nibble_status.h) continue ;;
      nibble.h) echo "$f:$line: includes the public API nibble.h (internal code uses the internal headers)"
                bad=$((bad + 1)); continue ;;
      */*) dep=${inc%%/*} ;;
      *) continue ;; # a header next to the file
    esac
    if [ "$me" = bench ]; then
      [ "$dep" = base ] || [ "$dep" = bench ] || {
        echo "$f:$line: includes \"$inc\": src/bench uses base only"; bad=$((bad + 1)); }
      continue
    fi
    d=$(rank "$dep")
    if [ "$d" = -1 ]; then
      [ "$dep" = cli ] && { echo "$f:$line: includes \"$inc\": only src/cli uses the CLI"; bad=$((bad + 1)); }
      continue # not a subsystem (a system header with a directory)
    fi
    if [ "$d" -gt "$me" ]; then
      echo "$f:$line: includes \"$inc\": $sub (layer $me) may not use $dep (layer $d); order: ${LAYERS[*]}"
      bad=$((bad + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | \
           sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(find src tests/unit -name '*.[ch]' | sort)
if [ $bad -gt 0 ]; then
  echo "check-layers: $bad include(s) against the layer order"
  exit 1
fi
echo "check-layers: ok ($checked includes)"
