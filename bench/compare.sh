#!/bin/sh
# compare.sh runs weft's benchmarks on both backends in one session, round
# by round, so that the stack-copying backend, the portable backend and the
# peers (iter.Pull, goroutines) are measured side by side on one machine
# minutes apart. The backend is fixed per process (WEFT_BACKEND), so each
# round runs the benchmarks once per backend; the portable run's weft
# sub-benchmarks are renamed impl=weft-portable and impl=weft.Pull-portable,
# and its peer lines, already measured in the same round, are dropped.
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
	WEFT_BACKEND=portable /tmp/weft-bench.test -test.run='^$' -test.bench="$pattern" -test.count=1 |
		grep '^Benchmark.*impl=weft' |
		sed -e 's/impl=weft\.Pull\//impl=weft.Pull-portable\//' -e 's/impl=weft\.Pull-\([0-9]\)/impl=weft.Pull-portable-\1/' \
			-e 's/impl=weft\//impl=weft-portable\//' -e 's/impl=weft-\([0-9]\)/impl=weft-portable-\1/'
done
rm -f /tmp/weft-bench.test
