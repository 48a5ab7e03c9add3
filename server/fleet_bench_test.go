package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// BenchmarkFleetTurns: turns per second of agent echo (test/echo, instant) kept in one
// PostgreSQL database, served by one host or by three. Clients run 8 sessions per CPU
// at once and send each turn to the next host in turn, so that a session's turns move
// between hosts as a load balancer without affinity sends them (each turn then reopens
// the session from the database), or, sticky, keep a session on the host that created
// it. The hosts are in one process, each with its own deployment, server and
// connection pool.
func BenchmarkFleetTurns(b *testing.B) {
	for _, c := range []struct {
		hosts  int
		sticky bool // a session's turns all go to the host that created it
	}{{1, false}, {3, false}, {3, true}} {
		b.Run(fmt.Sprintf("hosts=%d/sticky=%v", c.hosts, c.sticky), func(b *testing.B) {
			url := pgtest.URL(b)
			hosts := make([]*testServer, c.hosts)
			for i := range hosts {
				hosts[i] = newTestServerWith(b, []deploy.Option{deploy.WithPostgres(url)}, server.WithIdleTimeout(0))
			}
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var id string
				var h *testServer
				for turn := 0; pb.Next(); turn = (turn + 1) % turnsPerSession {
					if turn == 0 || !c.sticky {
						h = hosts[next.Add(1)%int64(c.hosts)]
					}
					if turn == 0 {
						id = benchSession(b, h, "echo")
					}
					resp, err := h.Client().Post(h.URL+"/api/agents/echo/sessions/"+id+"/turns", "application/json", bytes.NewReader(benchTurnBody()))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("turn: status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
		})
	}
}

// BenchmarkSessionGrowthPostgres runs a session of 1,000 turns of agent echo kept in
// PostgreSQL and reports what its tables grew by (pg_total_relation_size: rows,
// indexes and TOAST), per turn and in all.
func BenchmarkSessionGrowthPostgres(b *testing.B) {
	const turns = 1000
	url := pgtest.URL(b)
	ts := newTestServerWith(b, []deploy.Option{deploy.WithPostgres(url)})
	conn, err := pgx.Connect(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(b.Context())
	size := func() int64 {
		b.Helper()
		var n int64
		err := conn.QueryRow(b.Context(), `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
JOIN pg_namespace s ON s.oid = c.relnamespace
WHERE s.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'terrarium\_%'`).Scan(&n)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	a := mustAgent(b, ts.dep, "echo")
	for b.Loop() {
		before := size()
		flow, err := a.Flow().ConnectAny(b.Context(), nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := range turns {
			in := &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(fmt.Sprintf("turn %d: a question of about the length people type", i))}}
			if err := flow.Send(in); err != nil {
				b.Fatal(err)
			}
			for _, err := range flow.Receive() {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		flow.Close()
		if _, err := flow.Output(); err != nil {
			b.Fatal(err)
		}
		grown := size() - before
		b.ReportMetric(float64(grown), "bytes/session")
		b.ReportMetric(float64(grown)/turns, "bytes/turn")
	}
}
