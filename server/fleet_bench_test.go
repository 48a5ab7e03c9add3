package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

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
