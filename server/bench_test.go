package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
)

// The benchmarks use agent client (test/echo, its clients keep the state: no
// snapshot is written, so a turn costs the transport and the flow alone) and echo
// (kept in Badger). test/echo answers at once: what is measured is Terrarium.

func benchTurnBody() []byte { return []byte(`{"text":"hi"}`) }

// turnsPerSession bounds a session's history in the turn benchmarks: a session keeps
// every message, and a turn sends them all to the model, so a session that grew for
// the whole run would measure its history, not the transport.
const turnsPerSession = 20

// BenchmarkTurnOverhead: one turn of an instant model, in-process (the flow's
// connection), over HTTP with server-sent events, and over a WebSocket. Every
// turnsPerSession turns the session is replaced, off the clock.
func BenchmarkTurnOverhead(b *testing.B) {
	ts := newTestServerWith(b, nil, server.WithIdleTimeout(0))
	in := &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}}
	b.Run("transport=in-process", func(b *testing.B) {
		a := mustAgent(b, ts.dep, "client")
		var conn session.AnyConnection
		for i := 0; i < b.N; i++ {
			if i%turnsPerSession == 0 {
				b.StopTimer()
				if conn != nil {
					conn.Close()
					conn.Output()
				}
				var err error
				if conn, err = a.Flow().ConnectAny(b.Context(), nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
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
	})
	b.Run("transport=http-sse", func(b *testing.B) {
		var url string
		for i := 0; i < b.N; i++ {
			if i%turnsPerSession == 0 {
				b.StopTimer()
				url = ts.URL + "/api/agents/client/sessions/" + benchSession(b, ts, "client") + "/turns"
				b.StartTimer()
			}
			req, _ := http.NewRequest("POST", url, bytes.NewReader(benchTurnBody()))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := ts.Client().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
	b.Run("transport=websocket", func(b *testing.B) {
		var c *websocket.Conn
		for i := 0; i < b.N; i++ {
			if i%turnsPerSession == 0 {
				b.StopTimer()
				if c != nil {
					c.CloseNow()
				}
				var err error
				if c, _, err = websocket.Dial(b.Context(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/client/connect", nil); err != nil {
					b.Fatal(err)
				}
				c.Read(b.Context()) // the session message
				b.StartTimer()
			}
			if err := c.Write(b.Context(), websocket.MessageText, benchTurnBody()); err != nil {
				b.Fatal(err)
			}
			for {
				_, data, err := c.Read(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Contains(data, []byte(`"endTurn":true`)) {
					break
				}
			}
		}
		c.CloseNow()
	})
}

func benchSession(b testing.TB, ts *testServer, agent string) string {
	resp, err := ts.Client().Post(ts.URL+"/api/agents/"+agent+"/sessions", "application/json", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var info server.SessionInfo
	json.NewDecoder(resp.Body).Decode(&info)
	return info.SessionID
}

// heap returns the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIdleSessionMemory: what an idle session costs, open on the server with a
// WebSocket connected (client and server side: both are in this process), open on
// the server without one, and kept in Badger only (bytes stored after one turn).
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 1000
	b.Run("idle=websocket", func(b *testing.B) {
		for b.Loop() {
			ts := newTestServerWith(b, nil, server.WithIdleTimeout(0))
			before := heap()
			conns := make([]*websocket.Conn, n)
			for i := range conns {
				c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/agents/echo/connect", nil)
				if err != nil {
					b.Fatal(err)
				}
				c.Read(context.Background())
				conns[i] = c
			}
			b.ReportMetric(float64(heap()-before)/n, "heap-bytes/session")
			for _, c := range conns {
				c.CloseNow()
			}
		}
	})
	b.Run("idle=open", func(b *testing.B) {
		for b.Loop() {
			ts := newTestServerWith(b, nil, server.WithIdleTimeout(0))
			before := heap()
			for range n {
				benchSession(b, ts, "echo")
			}
			b.ReportMetric(float64(heap()-before)/n, "heap-bytes/session")
		}
	})
	b.Run("idle=stored", func(b *testing.B) {
		for b.Loop() {
			st, err := badgerstore.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ts := newTestServerWith(b, []deploy.Option{deploy.WithStore(st)}, server.WithIdleTimeout(0))
			for range n {
				id := benchSession(b, ts, "echo")
				resp, err := ts.Client().Post(ts.URL+"/api/agents/echo/sessions/"+id+"/turns", "application/json", bytes.NewReader(benchTurnBody()))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				req, _ := http.NewRequest("DELETE", ts.URL+"/api/agents/echo/sessions/"+id, nil)
				resp, err = ts.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			stats, err := st.Stats(context.Background(), "echo")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(stats.Bytes)/n, "stored-bytes/session")
		}
	})
}

// BenchmarkConcurrentSessions: 10,000 sessions open on one server, a turn on each at
// once over HTTP; the turn latency's percentiles and the process's resident memory
// (client included).
func BenchmarkConcurrentSessions(b *testing.B) {
	const n = 10000
	for b.Loop() {
		ts := newTestServerWith(b, nil, server.WithIdleTimeout(0))
		tr := &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}
		client := &http.Client{Transport: tr}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = benchSession(b, ts, "client")
		}
		lat := make([]time.Duration, n)
		start := time.Now()
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				start := time.Now()
				resp, err := client.Post(ts.URL+"/api/agents/client/sessions/"+id+"/turns", "application/json", bytes.NewReader(benchTurnBody()))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(start)
			})
		}
		wg.Wait()
		b.ReportMetric(n/time.Since(start).Seconds(), "turns/s")
		slices.Sort(lat)
		b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[n*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(rss())/(1<<20), "rss-MiB")
		tr.CloseIdleConnections()
	}
}

// rss returns the process's resident set size, from /proc (0 elsewhere).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
