package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

func httpErr(status int, retryAfter float64) error {
	return &abi.Error{Code: abi.CodeUnavailable, Message: "provider says no", Status: status, RetryAfter: retryAfter}
}

var fast = agent.Reliability{Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

func TestReliableRetriesTransientErrors(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "p/primary").Push(testmodel.Turn{Err: httpErr(503, 0)}, testmodel.Turn{Err: httpErr(502, 0)}).ReplyText("third time lucky")
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("p/primary"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, fast)))
	if err != nil || text != "third time lucky" || len(m.Requests()) != 3 {
		t.Fatalf("text %q, err %v, %d calls", text, err, len(m.Requests()))
	}
}

func TestReliableHonoursRetryAfter(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "p/limited").Push(testmodel.Turn{Err: httpErr(429, 0.15)}).ReplyText("ok")
	start := time.Now()
	if _, err := agent.Generate(context.Background(), r, agent.WithModelName("p/limited"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, fast))); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("retried after %v, before the provider's Retry-After", waited)
	}
	// A Retry-After longer than we accept fails at once.
	testmodel.Define(r, "p/closed").Push(testmodel.Turn{Err: httpErr(429, 3600)}).ReplyText("never")
	rel := fast
	rel.MaxRetryAfter = time.Second
	start = time.Now()
	_, err := agent.Generate(context.Background(), r, agent.WithModelName("p/closed"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, rel)))
	if err == nil || !strings.Contains(err.Error(), "asks to wait 1h0m0s") || time.Since(start) > time.Second {
		t.Errorf("long Retry-After: %v after %v", err, time.Since(start))
	}
}

func TestReliableFallsBackToBackups(t *testing.T) {
	r := agent.NewRegistry()
	primary := testmodel.Define(r, "p/primary").Push(testmodel.Turn{Err: httpErr(400, 0)})
	first := testmodel.Define(r, "p/first").Push(testmodel.Turn{Err: httpErr(500, 0)}, testmodel.Turn{Err: httpErr(500, 0)})
	second := testmodel.Define(r, "p/second").ReplyText("from the second backup")
	rel := fast
	rel.Retries = 1
	rel.Backups = []string{"p/missing", "p/first", "p/second"}
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("p/primary"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil || text != "from the second backup" {
		t.Fatalf("%q, %v", text, err)
	}
	// A 400 is not retried on the same model; 500s are, once each.
	if len(primary.Requests()) != 1 || len(first.Requests()) != 2 || len(second.Requests()) != 1 {
		t.Errorf("calls: primary %d, first %d, second %d", len(primary.Requests()), len(first.Requests()), len(second.Requests()))
	}
	// When every model fails, the error lists them all.
	testmodel.Define(r, "p/a").Push(testmodel.Turn{Err: httpErr(401, 0)})
	testmodel.Define(r, "p/b").Push(testmodel.Turn{Err: httpErr(404, 0)})
	rel.Backups = []string{"p/b"}
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("p/a"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, rel)))
	var e *abi.Error
	if err == nil || !strings.Contains(err.Error(), "model p/a") || !strings.Contains(err.Error(), "model p/b") || !errors.As(err, &e) {
		t.Errorf("all failed: %v", err)
	}
}

func TestReliableTimesOutEachAttempt(t *testing.T) {
	r := agent.NewRegistry()
	calls := 0
	agent.DefineModel(r, "p/slow", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		calls++
		<-ctx.Done()
		return nil, ctx.Err()
	})
	testmodel.Define(r, "p/backup").ReplyText("quick")
	rel := fast
	rel.Timeout = 20 * time.Millisecond
	rel.Retries = 1
	rel.Backups = []string{"p/backup"}
	text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("p/slow"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, rel)))
	if err != nil || text != "quick" || calls != 2 {
		t.Errorf("%q, %v, %d calls of the slow model", text, err, calls)
	}
}

func TestReliableDoesNotRetryAfterStreaming(t *testing.T) {
	r := agent.NewRegistry()
	m := testmodel.Define(r, "p/flaky").Push(testmodel.Turn{
		Chunks: []*abi.GenerateResponseChunk{{Content: []*abi.Part{abi.NewTextPart("half an answ")}}},
		Err:    httpErr(503, 0),
	}).ReplyText("never reached")
	var gotErr error
	for _, err := range agent.GenerateStream(context.Background(), r, agent.WithModelName("p/flaky"), agent.WithPrompt("x"), agent.WithMiddleware(agent.Reliable(r, fast))) {
		if err != nil {
			gotErr = err
		}
	}
	if gotErr == nil || len(m.Requests()) != 1 {
		t.Errorf("err %v after %d calls", gotErr, len(m.Requests()))
	}
}

func TestUseModelMiddlewarePerModel(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "p/m").Push(testmodel.Turn{Err: httpErr(503, 0)}).ReplyText("recovered")
	if err := r.UseModelMiddleware("p/m", agent.Reliable(r, fast)); err != nil {
		t.Fatal(err)
	}
	// No middleware at the call: the model carries its own.
	if text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("p/m"), agent.WithPrompt("x")); err != nil || text != "recovered" {
		t.Errorf("%q, %v", text, err)
	}
	if err := r.UseModelMiddleware("p/none", agent.Reliable(r, fast)); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{httpErr(429, 1), true},
		{httpErr(503, 0), true},
		{httpErr(400, 0), false},
		{&abi.Error{Code: abi.CodePermissionDenied, Status: 429, Message: "insufficient_quota"}, false},
		{&abi.Error{Code: abi.CodeUnavailable, Message: "connection refused"}, true},
		{errors.New("plain"), false},
	} {
		if got := agent.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
