#!/bin/sh
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
set -eu
rounds=${1:-6}
pattern=${2:-.}
cd "$(dirname "$0")/.."
go test -c -o /tmp/weft-bench.test ./bench
i=0
while [ "$i" -lt "$rounds" ]; do
	i=$((i + 1))
	if [ "$i" -eq 1 ]; then
		/tmp/weft-bench.test -test.run='^$' -test.bench="$pattern" -test.count=1
	else
		/tmp/weft-bench.test -test.run='^$' -test.bench="$pattern" -test.count=1 | grep '^Benchmark'
	fi
	for cfg in WEFT_BACKEND=portable WEFT_THAW=eager; do
		name=${cfg#*=}
		env "$cfg" /tmp/weft-bench.test -test.run='^$' -test.bench="$pattern" -test.count=1 |
			grep '^Benchmark.*impl=weft' |
			sed -e "s/impl=weft\.Pull\//impl=weft.Pull-$name\//" -e "s/impl=weft\.Pull-\([0-9]\)/impl=weft.Pull-$name-\1/" \
				-e "s/impl=weft\//impl=weft-$name\//" -e "s/impl=weft-\([0-9]\)/impl=weft-$name-\1/"
	done
done
rm -f /tmp/weft-bench.test
