package agent_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// instantModel answers at once: with the tool request when the last message is the
// user's and toolReq is set, else with a fixed text. What remains of a call's cost is
// the framework's.
func instantModel(toolReq *abi.Part) agent.Model {
	answer := &abi.GenerateResponse{Message: abi.NewModelTextMessage("The sum is 3."), FinishReason: abi.FinishStop}
	ask := &abi.GenerateResponse{Message: abi.NewModelMessage(toolReq), FinishReason: abi.FinishStop}
	return agent.NewModel("bench/instant", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		if toolReq != nil && req.Messages[len(req.Messages)-1].Role == abi.RoleUser {
			c := *ask
			return &c, nil
		}
		c := *answer
		return &c, nil
	})
}

// generateCases are the calls BenchmarkGenerate and TestGenerateAllocations make: a
// plain call (one model call), and a tool loop (the model asks for a tool, then
// answers: two model calls and one tool call).
func generateCases() map[string]func() error {
	ctx := context.Background()
	r := agent.NewRegistry()
	plain := instantModel(nil)
	loop := instantModel(toolReq("add", "1", map[string]any{"a": 1, "b": 2}))
	add := newAdd(nil)
	return map[string]func() error{
		"plain": func() error {
			_, err := agent.Generate(ctx, r, agent.WithModel(plain), agent.WithPrompt("What is 1 + 2?"))
			return err
		},
		"toolloop": func() error {
			_, err := agent.Generate(ctx, r, agent.WithModel(loop), agent.WithPrompt("What is 1 + 2?"), agent.WithTools(add))
			return err
		},
	}
}

// BenchmarkGenerate measures agent.Generate with an instant model: plain and with a
// tool loop, with no tracer and under a recording OpenTelemetry SDK tracer (no
// exporter: what is measured is the spans' making).
func BenchmarkGenerate(b *testing.B) {
	for _, tracer := range []string{"none", "recording"} {
		for _, name := range []string{"plain", "toolloop"} {
			b.Run("tracer="+tracer+"/"+name, func(b *testing.B) {
				prev := otel.GetTracerProvider()
				if tracer == "recording" {
					otel.SetTracerProvider(sdktrace.NewTracerProvider())
				} else {
					otel.SetTracerProvider(noop.NewTracerProvider())
				}
				defer otel.SetTracerProvider(prev)
				call := generateCases()[name]
				b.ReportAllocs()
				for b.Loop() {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestGenerateAllocations holds Generate with a no-op tracer to what it allocates now
// that tracing asks first whether anything records (at aac81be it did not: 41
// allocations for the plain call, 166 for the tool loop) and a tool's input schema is
// compiled once per definition. Before tracing existed (9eb5be3) this benchmark's calls
// allocated 19 and 125 times: the plain call's 3 more are the typed options of the same
// restructuring (each option a value behind an interface, and the map recording which
// option set what), not tracing, whose share is none.
func TestGenerateAllocations(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("the race detector changes what sync.Pool keeps, and so the allocations")
	}
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	defer otel.SetTracerProvider(prev)
	cases := generateCases()
	for name, most := range map[string]float64{"plain": 22, "toolloop": 95} {
		call := cases[name]
		var err error
		n := testing.AllocsPerRun(50, func() { err = call() })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Generate (%s): %v allocations", name, n)
		if n > most {
			t.Errorf("Generate (%s) allocated %v times, want at most %v", name, n, most)
		}
	}
}
