package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/server"
)

// BenchmarkTenantFairness: the latency of a quiet tenant's turns (one at a time, each
// a few milliseconds of CPU) while a noisy tenant floods the server with turns from 8
// clients that ignore Retry-After and try again at once, against its latency while the
// flood pauses: with the noisy tenant's concurrentTurns quota at 1 (its other turns
// refused at once, or waiting in a line long enough for all), and with no quota. The
// flood pauses and resumes every phaseTurns quiet turns, so both halves share the
// machine's load as it comes; each half's percentiles and their ratio are reported,
// with the noisy tenant's refusals a second while it floods.
func BenchmarkTenantFairness(b *testing.B) {
	const phaseTurns = 10
	for _, c := range []struct{ name, quota string }{
		{"quota=1", "{concurrentTurns: 1}"},
		{"quota=1+queue", "{concurrentTurns: 1, queuedTurns: 8}"},
		{"quota=none", "{}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ts := newTenantServerOf(b, "tenants:\n  - id: noisy\n    quotas: "+c.quota+"\n  - id: quiet\n")
			// The flooders hold paused for reading while they send; the benchmark takes
			// it for writing to pause them, which waits for their requests in flight.
			var paused sync.RWMutex
			paused.Lock()
			stop := make(chan struct{})
			var flooding sync.WaitGroup
			errs := make(chan error, 8)
			var refused atomic.Int64
			for range 8 {
				flooding.Go(func() { errs <- flood(ts, ts.key["noisy"], &refused, &paused, stop) })
			}
			var quiet, flooded []time.Duration
			var floodTime time.Duration
			var id string
			b.ResetTimer()
			for i := range b.N {
				if i%turnsPerSession == 0 {
					id = tenantSession(b, ts, ts.key["quiet"])
				}
				floods := i/phaseTurns%2 == 1
				if i%phaseTurns == 0 && i > 0 {
					if floods {
						paused.Unlock()
					} else {
						paused.Lock()
					}
				}
				sent := time.Now()
				if resp := ts.call(b, ts.key["quiet"], "POST", "/api/agents/work/sessions/"+id+"/turns", map[string]any{"text": "hi"}, nil); resp.StatusCode != http.StatusOK {
					b.Fatalf("quiet turn: %d", resp.StatusCode)
				}
				if took := time.Since(sent); floods {
					flooded, floodTime = append(flooded, took), floodTime+took
				} else {
					quiet = append(quiet, took)
				}
			}
			b.StopTimer()
			if (b.N-1)/phaseTurns%2 == 0 {
				paused.Unlock() // let the flooders see stop
			}
			close(stop)
			flooding.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatalf("flooding: %v", err)
				}
			}
			if len(flooded) == 0 {
				return // the benchmark's first probe, b.N = 1; -benchtime 600x gives 300 turns each way
			}
			p := func(lat []time.Duration, q int) float64 {
				slices.Sort(lat)
				return float64(lat[(len(lat)-1)*q/100].Microseconds()) / 1000
			}
			b.ReportMetric(p(quiet, 50), "p50-ms-alone")
			b.ReportMetric(p(flooded, 50), "p50-ms-flooded")
			b.ReportMetric(p(quiet, 99), "p99-ms-alone")
			b.ReportMetric(p(flooded, 99), "p99-ms-flooded")
			b.ReportMetric(p(flooded, 99)/p(quiet, 99), "p99-flooded/alone")
			b.ReportMetric(float64(refused.Load())/floodTime.Seconds(), "refusals/s")
		})
	}
}

// tenantSession creates a session of the work agent with key.
func tenantSession(b *testing.B, ts *tenantServer, key string) string {
	var info struct{ SessionID string }
	if resp := ts.call(b, key, "POST", "/api/agents/work/sessions", nil, &info); resp.StatusCode != http.StatusCreated {
		b.Fatalf("creating a session: %d", resp.StatusCode)
	}
	return info.SessionID
}

// flood sends turns with key until stop is closed, at once again after each answer,
// 429 or not, each while holding paused for reading, and counts the 429s in refused.
// It runs beside the benchmark's goroutine, so it stops at its first error rather
// than failing the benchmark.
func flood(ts *tenantServer, key string, refused *atomic.Int64, paused *sync.RWMutex, stop <-chan struct{}) error {
	post := func(path, body string) ([]byte, error) {
		req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused.Add(1)
		}
		return io.ReadAll(resp.Body)
	}
	var path string
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		paused.RLock()
		err := func() error {
			if i%turnsPerSession == 0 {
				data, err := post("/api/agents/work/sessions", "")
				if err != nil {
					return err
				}
				var info server.SessionInfo
				if err := json.Unmarshal(data, &info); err != nil {
					return fmt.Errorf("creating a session: %s: %w", data, err)
				}
				path = "/api/agents/work/sessions/" + info.SessionID + "/turns"
			}
			_, err := post(path, `{"text":"flood"}`)
			return err
		}()
		paused.RUnlock()
		if err != nil {
			return err
		}
	}
}
