//go:build unix

package session_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// This file, with turnFlow (flow_test.go), is also built against commit 9eb5be3
// (before the restructuring, where these names were agent's) to compare the turn side
// by side: see BENCHMARKS.md. It
// reports, besides the time a turn takes, the CPU time the process spent on it
// (cpu-ns/op, all threads, the collector's included), which other jobs sharing the
// machine disturb far less.

// cpuTime returns the CPU time the process has used, user and system. It is
// testenv.CPUTime written here again because bench/turn-vs-9eb5be3.sh builds this file
// on commits that have no testenv.CPUTime.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runTurns runs b.N turns of the flow, each on a connection opened with opts and
// renewed every 50 turns, so a connection's history grows by at most 100 messages; in
// asks each turn's input.
func runTurns(b *testing.B, flow *session.SessionFlow[ChatStatus, ChatState], in *session.SessionFlowInput, opts ...session.StreamBidiOption[ChatState]) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	defer func() { b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op") }()
	var conn *session.SessionFlowConnection[ChatStatus, ChatState]
	for i := 0; i < b.N; i++ {
		if i%50 == 0 {
			if conn != nil {
				conn.Close()
				if _, err := conn.Output(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if conn, err = flow.StreamBidi(ctx, opts...); err != nil {
				b.Fatal(err)
			}
		}
		if err := conn.Send(in); err != nil {
			b.Fatal(err)
		}
		for _, err := range conn.Receive() {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	conn.Close()
	if _, err := conn.Output(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSessionFlowTurn measures one SessionFlow turn (send, model, stream, EndTurn)
// with an instant model: a turn that changes no custom state, one that changes it
// (updated), and one that changes it and asks for its patches (streamed); without
// snapshots, and with a snapshot every turn in memory and in Badger (durable: each
// snapshot is synced to disk before EndTurn returns).
func BenchmarkSessionFlowTurn(b *testing.B) {
	model := instantModel()
	input := []*abi.Message{abi.NewUserTextMessage("What are channels used for?")}
	stores := benchStores(b)
	for _, custom := range []string{"none", "updated", "streamed"} {
		in := &session.SessionFlowInput{Messages: input}
		if custom == "streamed" {
			in.CustomPatches = true // not at 9eb5be3, which had no patches
		}
		for _, snaps := range []string{"off", "memory", "badger"} {
			b.Run("custom="+custom+"/snapshots="+snaps, func(b *testing.B) {
				var opts []session.SessionFlowOption[ChatState]
				if snaps != "off" {
					opts = append(opts, session.WithSnapshotStore(session.NewSnapshotStore[ChatState](stores[snaps](b))))
				}
				runTurns(b, turnFlow(agent.NewRegistry(), model, custom != "none", opts...), in)
			})
		}
	}
}

// BenchmarkSessionFlowTurnHistory measures a turn of a conversation 10 and 1,000
// messages long (a client-kept state: each connection starts from it, 50 turns a
// connection), with no tracer and under a recording OpenTelemetry SDK tracer (no
// exporter: what is measured is the spans' making): a turn's cost must not grow with
// the history.
func BenchmarkSessionFlowTurnHistory(b *testing.B) {
	model := instantModel()
	in := &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage("What are channels used for?")}}
	for _, tracer := range []string{"none", "recording"} {
		for _, n := range []int{10, 1000} {
			b.Run(fmt.Sprintf("tracer=%s/history=%d", tracer, n), func(b *testing.B) {
				if tracer == "recording" {
					prev := otel.GetTracerProvider()
					otel.SetTracerProvider(sdktrace.NewTracerProvider())
					defer otel.SetTracerProvider(prev)
				}
				var history []*abi.Message
				for turn := range n / 2 {
					history = append(history, chatTurn(turn)...)
				}
				flow := turnFlow(agent.NewRegistry(), model, true)
				runTurns(b, flow, in, session.WithState(&session.SessionState[ChatState]{Messages: history}))
			})
		}
	}
}
