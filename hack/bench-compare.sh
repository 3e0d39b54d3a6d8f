#!/usr/bin/env bash
# Runs a make target in a baseline checkout and in this one, alternately,
# so both are measured in one run under the same conditions, and prints
# each run's benchmark lines side by side (prefixed "base" / "this").
#
#   hack/bench-compare.sh /path/to/baseline-checkout bench-felix [rounds]
#
# The baseline is any other checkout of Tabby (e.g. `git worktree add
# /tmp/base <commit>`). Full logs go to $OUT (default /tmp/bench-compare).
set -euo pipefail
base=$(cd "$1" && pwd); target=$2; rounds=${3:-1}
this=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/bench-compare}; mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
	for side in base this; do
		dir=$base; [ "$side" = this ] && dir=$this
		log="$out/$target-$side-$r.log"
		echo "== round $r: $side ($dir, $(git -C "$dir" rev-parse --short HEAD))"
		make -C "$dir" --no-print-directory "$target" >"$log" 2>&1 || { echo "FAILED: see $log"; tail -20 "$log"; exit 1; }
		grep -E '^(Benchmark|scale|    [a-z].*:)' "$log" | sed "s/^/$side  /" || true
	done
done
