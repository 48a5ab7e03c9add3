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
// a few milliseconds of CPU) alone, and while a noisy tenant floods the server with
// turns from 8 clients that ignore Retry-After and try again at once: with the noisy
// tenant's concurrentTurns quota at 1 (its other turns refused at once, or waiting in
// a line long enough for all), and with no quota. Reports the quiet tenant's median
// and 99th percentile turn latency, and the noisy tenant's refusals a second.
func BenchmarkTenantFairness(b *testing.B) {
	for _, c := range []struct {
		name  string
		quota string
		flood bool
	}{
		{"noisy=idle", "", false},
		{"noisy=flood/quota=1", "{concurrentTurns: 1}", true},
		{"noisy=flood/quota=1+queue", "{concurrentTurns: 1, queuedTurns: 8}", true},
		{"noisy=flood/quota=none", "{}", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			quota := c.quota
			if quota == "" {
				quota = "{}"
			}
			ts := newTenantServerOf(b, "tenants:\n  - id: noisy\n    quotas: "+quota+"\n  - id: quiet\n")
			stop := make(chan struct{})
			var flooding sync.WaitGroup
			errs := make(chan error, 8)
			var refused atomic.Int64
			if c.flood {
				for range 8 {
					flooding.Go(func() { errs <- flood(ts, ts.key["noisy"], &refused, stop) })
				}
			}
			var lat []time.Duration
			var id string
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if i%turnsPerSession == 0 {
					id = tenantSession(b, ts, ts.key["quiet"])
				}
				sent := time.Now()
				if resp := ts.call(b, ts.key["quiet"], "POST", "/api/agents/work/sessions/"+id+"/turns", map[string]any{"text": "hi"}, nil); resp.StatusCode != http.StatusOK {
					b.Fatalf("quiet turn: %d", resp.StatusCode)
				}
				lat = append(lat, time.Since(sent))
			}
			b.StopTimer()
			elapsed := time.Since(start)
			close(stop)
			flooding.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatalf("flooding: %v", err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(refused.Load())/elapsed.Seconds(), "refusals/s")
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
// 429 or not, and counts the 429s in refused. It runs beside the benchmark's
// goroutine, so it stops at its first error rather than failing the benchmark.
func flood(ts *tenantServer, key string, refused *atomic.Int64, stop <-chan struct{}) error {
	post := func(path, body string) ([]byte, error) {
		req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
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
		if _, err := post(path, `{"text":"flood"}`); err != nil {
			return err
		}
	}
}
