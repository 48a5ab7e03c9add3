package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/server"
)

func TestShutdownLetsRunningTurnsFinish(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	turn := make(chan int)
	go func() {
		resp := ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"finish me"}`, nil)
		turn <- resp.StatusCode
	}()
	<-ts.gate.started
	stopped := make(chan error)
	go func() { stopped <- ts.srv.Shutdown(context.Background()) }()

	// Draining: not ready, and no new turn starts (the running one still holds the
	// session, so a new session's turn shows it).
	for {
		if resp := ts.do(t, "GET", "/readyz", nil, nil); resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
	}
	var e abi.Error
	if resp := ts.do(t, "POST", "/api/agents/echo/sessions", nil, &e); resp.StatusCode != http.StatusServiceUnavailable || e.Code != "shutting_down" {
		t.Errorf("a new session while shutting down: %d %+v", resp.StatusCode, e)
	}
	close(ts.gate.release)
	if status := <-turn; status != 200 {
		t.Errorf("the running turn ended with %d", status)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	// The turn was snapshotted before the session closed.
	snaps, err := mustAgent(t, ts.dep, "gate").Snapshots(t.Context(), id)
	if err != nil || len(snaps) != 1 {
		t.Errorf("snapshots after shutdown: %d, %v", len(snaps), err)
	}
}

func TestShutdownCancelsTurnsPastItsDeadline(t *testing.T) {
	ts := newTestServer(t)
	id := ts.newSession(t, "gate", nil)
	turn := make(chan abi.Error)
	go func() {
		var e abi.Error
		ts.do(t, "POST", "/api/agents/gate/sessions/"+id+"/turns", `{"text":"too slow"}`, &e)
		turn <- e
	}()
	<-ts.gate.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown past its deadline: %v", err)
	}
	if e := <-turn; e.Code != "shutting_down" {
		t.Errorf("the cancelled turn: %+v", e)
	}
}

func TestMetrics(t *testing.T) {
	mp, h, err := server.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, []deploy.Option{deploy.WithMeterProvider(mp)}, server.WithMetrics(mp, h))
	id := ts.newSession(t, "echo", nil)
	ts.streamTurn(t, "echo", id, map[string]any{"text": "count me"})
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`terrarium_turns_total{agent="echo",otel_scope_name="github.com/terrarium-ai/terrarium/server"`,
		`terrarium_turn_duration_seconds_count{agent="echo"`,
		`terrarium_sessions_live{otel_scope_name="github.com/terrarium-ai/terrarium/server"`,
		`terrarium_model_duration_seconds_count{model="test/echo"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func mustAgent(t testing.TB, d *deploy.Deployment, name string) *deploy.Agent {
	t.Helper()
	a, err := d.Agent(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
