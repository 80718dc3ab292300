#!/usr/bin/env bash
# Whether two twobs binaries generate the same machine code for the built-ins:
# the planner's kernel of each, compiled by NVRTC for sm_90 and disassembled
# with cuobjdump, compared instruction by instruction (addresses stripped).
# For changes that must not move the SASS (a template or snippet refactor).
#
# Usage: scripts/sass-diff.sh OLD_BINARY NEW_BINARY [LOG_DIR]
set -uo pipefail
old=$1 new=$2 log=${3:-${OUT:-/tmp}/sass-diff}
mkdir -p "$log"
same=0 differ=0
for p in sdh rdf 2pcf kde selfjoin knn nlj; do
  for side in old new; do
    bin=${!side}
    rm -f "$log/$p-$side.cubin"
    "$bin" gen "$p" --device h200 --check --cubin "$log/$p-$side.cubin" >/dev/null 2>"$log/$p-$side.log"
    cuobjdump -sass "$log/$p-$side.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' |
      sed -E 's@^\s+/\*[0-9a-f]{4}\*/\s+@@; s@\s*/\*[^*]*\*/\s*$@@; s@\s+;@;@' >"$log/$p-$side.sass"
  done
  n=$(wc -l <"$log/$p-new.sass")
  if cmp -s "$log/$p-old.sass" "$log/$p-new.sass"; then
    same=$((same + 1)); echo "same    $p ($n instructions)"
  else
    differ=$((differ + 1))
    echo "DIFFERS $p ($(wc -l <"$log/$p-old.sass") -> $n instructions)"
    diff "$log/$p-old.sass" "$log/$p-new.sass" | head -20
  fi
done
echo "sass: $same same, $differ differ"
