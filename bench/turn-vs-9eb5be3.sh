#!/bin/sh
# Runs BenchmarkSessionFlowTurn (agent/session/turn_bench_test.go) against the same
# benchmark built on commit 9eb5be3, the last before the restructuring, the two builds
# taking turns, one process at a time, and compares them with benchstat:
#
#	bench/turn-vs-9eb5be3.sh [rounds]    (default 15; needs benchstat on PATH)
#
# At 9eb5be3 session flows lived in package agent and had no custom-state patches: the
# benchmark file and its flow (turnFlow, flow_test.go) are copied there with session's
# names made agent's and the variant that asks for patches left out.
set -e
rounds=${1:-15}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive 9eb5be3 | tar -x -C "$work"
{
	sed -e 's/^package session_test/package agent_test/' \
		-e '/terrarium\/agent\/session"$/d' -e '/^\t"fmt"$/d' -e '/otel"$/d' -e '/sdktrace /d' \
		-e 's/^\t"context"$/\t"context"\n\t"slices"/' \
		-e 's/"none", "updated", "streamed"/"none", "updated"/' -e '/if custom == "streamed" {/,/^\t\t}$/d' \
		-e '/^\/\/ BenchmarkSessionFlowTurnHistory/,$d' -e 's/session\./agent./g' \
		"$root/agent/session/turn_bench_test.go"
	sed -n '/^\/\/ turnFlow is a chat flow/,/^}$/p' "$root/agent/session/flow_test.go" | sed 's/session\./agent./g'
} >"$work/agent/turn_bench_test.go"
sed -i 's/^func BenchmarkSessionFlowTurn(/func benchmarkSessionFlowTurnReplaced(/' "$work/agent/bench_test.go"
(cd "$work" && go test -c -o "$work/base.test" ./agent)
(cd "$root" && go test -c -o "$work/now.test" ./agent/session)
bench='SessionFlowTurn/custom=(none|updated)/snapshots=(off|memory)$'
for i in $(seq "$rounds"); do
	(cd "$work/agent" && "$work/base.test" -test.run XXX -test.bench "$bench" -test.benchtime 5000x -test.benchmem) | grep ^Benchmark >>"$work/9eb5be3.txt"
	(cd "$root/agent/session" && "$work/now.test" -test.run XXX -test.bench "$bench" -test.benchtime 5000x -test.benchmem) | grep ^Benchmark >>"$work/now.txt"
done
cd "$work" && benchstat 9eb5be3.txt now.txt
