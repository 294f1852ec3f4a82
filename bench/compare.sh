#!/usr/bin/env bash
# compare.sh runs weft's benchmarks on both backends in one session, round
# by round, so that the stack-copying backend (with lazy thaw, its default,
# and with eager thaw), the portable backend and the peers (iter.Pull,
# goroutines) are measured side by side on one machine minutes apart. The
# backend and the thaw policy are fixed per process (WEFT_BACKEND,
# WEFT_THAW), so each round runs the benchmarks once per configuration;
# the other runs' weft sub-benchmarks are renamed impl=weft-portable,
# impl=weft.Pull-portable, impl=weft-eager and impl=weft.Pull-eager, and
# their peer lines, already measured in the same round, are dropped.
#
#	bench/compare.sh [rounds] [bench regexp] > bench.txt
#
# then summarise bench.txt with benchstat and draw it with bench/plot, as
# docs/benchmarks.md shows.
set -euo pipefail
rounds=${1:-6}
pattern=${2:-.}
cd "$(dirname "$0")/.."
bin=$(mktemp /tmp/weft-bench.XXXXXX)
out=$(mktemp /tmp/weft-bench-out.XXXXXX)
trap 'rm -f "$bin" "$out"' EXIT
go test -c -o "$bin" ./bench

# run [VAR=value] runs the benchmarks once into $out and fails the script
# (with the run's output) if they fail, so that a failed run is never
# filtered away into fewer samples.
run() {
	if ! env "$@" "$bin" -test.run='^$' -test.bench="$pattern" -test.count=1 >"$out" 2>&1; then
		echo "compare.sh: benchmarks failed ($*):" >&2
		cat "$out" >&2
		exit 1
	fi
}

i=0
while [ "$i" -lt "$rounds" ]; do
	i=$((i + 1))
	run
	if [ "$i" -eq 1 ]; then
		cat "$out"
	else
		grep '^Benchmark' "$out" || true
	fi
	for cfg in WEFT_BACKEND=portable WEFT_THAW=eager; do
		name=${cfg#*=}
		run "$cfg"
		{ grep '^Benchmark.*impl=weft' "$out" || true; } |
			sed -e "s/impl=weft\.Pull\//impl=weft.Pull-$name\//" -e "s/impl=weft\.Pull-\([0-9]\)/impl=weft.Pull-$name-\1/" \
				-e "s/impl=weft\//impl=weft-$name\//" -e "s/impl=weft-\([0-9]\)/impl=weft-$name-\1/"
	done
done
