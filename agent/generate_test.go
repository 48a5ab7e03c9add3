package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

func toolReq(name, ref string, input any) *abi.Part {
	return abi.NewToolRequestPart(&abi.ToolRequest{Name: name, Ref: ref, Input: input})
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func newAdd(calls *atomic.Int32) agent.Tool {
	return agent.NewTool("add", "adds two numbers", func(ctx context.Context, in addIn) (int, error) {
		if calls != nil {
			calls.Add(1)
		}
		return in.A + in.B, nil
	})
}

func TestGenerateSystemPromptAndConfigPassThrough(t *testing.T) {
	m := testmodel.New("test/m").ReplyText("hi there")
	type cfg struct {
		Temperature float64        `json:"temperature"`
		Extra       map[string]any `json:"someNewProviderKey"`
	}
	config := &cfg{Temperature: 0.3, Extra: map[string]any{"x": 1}}
	resp, err := agent.Generate(context.Background(), nil,
		agent.WithModel(m), agent.WithSystem("be brief"), agent.WithPrompt("hello"), agent.WithConfig(config))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "hi there" {
		t.Errorf("text = %q", resp.Text())
	}
	req := m.LastRequest()
	if len(req.Messages) != 2 || req.Messages[0].Role != abi.RoleSystem || req.Messages[0].Text() != "be brief" ||
		req.Messages[1].Role != abi.RoleUser || req.Messages[1].Text() != "hello" {
		t.Errorf("messages = %s", toJSONString(t, req.Messages))
	}
	got := resp.Request.Config
	if got != any(config) {
		t.Errorf("config was not passed through untouched: %#v", got)
	}
	if want := map[string]any{"temperature": 0.3, "someNewProviderKey": map[string]any{"x": 1.0}}; !reflect.DeepEqual(req.Config, want) {
		t.Errorf("model received config %#v, want %#v", req.Config, want)
	}
}

func TestGenerateModelByNameAndErrors(t *testing.T) {
	r := agent.NewRegistry()
	testmodel.Define(r, "test/named").ReplyText("ok")
	if text, err := agent.GenerateText(context.Background(), r, agent.WithModelName("test/named"), agent.WithPrompt("x")); err != nil || text != "ok" {
		t.Fatalf("GenerateText = %q, %v", text, err)
	}
	_, err := agent.Generate(context.Background(), r, agent.WithModelName("test/missing"))
	if !errors.Is(err, agent.ErrNotFound) || !strings.Contains(err.Error(), "test/missing") {
		t.Errorf("missing model: %v", err)
	}
	_, err = agent.Generate(context.Background(), r, agent.WithPrompt("x"))
	if !errors.Is(err, agent.ErrNoModel) {
		t.Errorf("no model: %v", err)
	}
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("test/named"), agent.WithToolNames("nope"))
	if !errors.Is(err, agent.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tool: %v", err)
	}
	_, err = agent.Generate(context.Background(), r, agent.WithModelName("test/named"), agent.WithMaxTurns(0))
	if err == nil || !strings.Contains(err.Error(), "WithMaxTurns(0)") {
		t.Errorf("bad option: %v", err)
	}
}

func TestGenerateDocsFoldedOnlyWithoutContextSupport(t *testing.T) {
	docs := []*abi.Document{abi.NewTextDocument("Paris is in France."), abi.NewTextDocument("Oslo is in Norway.")}
	plain := testmodel.New("test/plain").ReplyText("ok")
	if _, err := agent.Generate(context.Background(), nil, agent.WithModel(plain), agent.WithPrompt("where is Oslo?"), agent.WithDocs(docs...)); err != nil {
		t.Fatal(err)
	}
	user := plain.LastRequest().Messages[0]
	if len(user.Content) != 2 || !strings.Contains(user.Content[1].Text, "- [1]: Oslo is in Norway.") || user.Content[1].Metadata["purpose"] != "context" {
		t.Errorf("docs not folded into the prompt: %s", toJSONString(t, user))
	}
	ctxModel := testmodel.New("test/ctx", testmodel.WithInfo(&abi.ModelInfo{Supports: &abi.ModelSupports{Context: true}})).ReplyText("ok")
	if _, err := agent.Generate(context.Background(), nil, agent.WithModel(ctxModel), agent.WithPrompt("where is Oslo?"), agent.WithDocs(docs...)); err != nil {
		t.Fatal(err)
	}
	req := ctxModel.LastRequest()
	if len(req.Messages[0].Content) != 1 || len(req.Docs) != 2 {
		t.Errorf("a context-capable model should get docs untouched: %s", toJSONString(t, req))
	}
}

type weather struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

func TestGenerateStructuredOutput(t *testing.T) {
	cases := []struct {
		name        string
		constrained abi.Constrained
		tools       bool
		opts        []agent.GenerateOption
		native      bool
	}{
		{name: "no native support", constrained: abi.ConstrainedNone, native: false},
		{name: "native support", constrained: abi.ConstrainedAll, native: true},
		{name: "native without tools only, no tools", constrained: abi.ConstrainedNoTools, native: true},
		{name: "native without tools only, with tools", constrained: abi.ConstrainedNoTools, tools: true, native: false},
		{name: "native declined by the request", constrained: abi.ConstrainedAll, opts: []agent.GenerateOption{agent.WithConstrained(false)}, native: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testmodel.New("test/json", testmodel.WithInfo(&abi.ModelInfo{Supports: &abi.ModelSupports{Tools: true, Constrained: c.constrained}}))
			m.ReplyText("Sure!\n```json\n{\"city\": \"Oslo\", \"tempC\": -3.5}\n```")
			opts := append([]agent.GenerateOption{agent.WithModel(m), agent.WithPrompt("weather in Oslo?")}, c.opts...)
			if c.tools {
				opts = append(opts, agent.WithTools(newAdd(nil)))
			}
			out, resp, err := agent.GenerateData[weather](context.Background(), nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if *out != (weather{City: "Oslo", TempC: -3.5}) {
				t.Errorf("output = %+v", out)
			}
			req := m.LastRequest()
			if req.Output.Format != "json" || req.Output.Schema["type"] != "object" || req.Output.Constrained != c.native {
				t.Errorf("output config = %s", toJSONString(t, req.Output))
			}
			last := req.Messages[len(req.Messages)-1]
			hasInstructions := len(last.Content) == 2 && strings.Contains(last.Content[1].Text, `"tempC"`)
			if hasInstructions == c.native {
				t.Errorf("native=%v but instructions present=%v: %s", c.native, hasInstructions, toJSONString(t, last))
			}
			if resp.Request.Output.Constrained != c.native {
				t.Error("response request does not record the output config")
			}
		})
	}
}

func TestGenerateInvalidOutput(t *testing.T) {
	for text, want := range map[string]string{
		"I cannot do that.":       "no JSON value",
		`{"city": "Oslo"}`:        "tempC",
		`{"city": 3, "tempC": 1}`: "/city",
		"```json\n[1, 2]\n```":    "want object",
	} {
		m := testmodel.New("test/bad").ReplyText(text)
		resp, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithOutputType(weather{}))
		if !errors.Is(err, agent.ErrInvalidOutput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want ErrInvalidOutput mentioning %q", text, err, want)
		}
		if resp == nil || resp.Text() != text {
			t.Errorf("%q: the response should come back with the error", text)
		}
	}
	// Custom instructions replace the generated ones; an empty text adds none.
	m := testmodel.New("test/instr").ReplyText(`{"city":"a","tempC":1}`).ReplyText(`{"city":"a","tempC":1}`)
	agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithOutputType(weather{}), agent.WithOutputInstructions("ANSWER IN JSON"))
	if got := m.LastRequest().Messages[0].Content[1].Text; got != "ANSWER IN JSON" {
		t.Errorf("custom instructions = %q", got)
	}
	agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithOutputType(weather{}), agent.WithOutputInstructions(""))
	if n := len(m.LastRequest().Messages[0].Content); n != 1 {
		t.Errorf("instructions added although disabled")
	}
}

func TestGenerateToolLoopRunsToolsConcurrently(t *testing.T) {
	// Each tool waits until both have started: run one after the other, they deadlock.
	var started sync.WaitGroup
	started.Add(2)
	slow := agent.NewTool("wait", "waits for the other call", func(ctx context.Context, in struct {
		ID string `json:"id"`
	}) (string, error) {
		started.Done()
		done := make(chan struct{})
		go func() { started.Wait(); close(done) }()
		select {
		case <-done:
			return "done " + in.ID, nil
		case <-time.After(10 * time.Second):
			return "", errors.New("tools did not run concurrently")
		}
	})
	m := testmodel.New("test/loop").
		Reply(abi.NewTextPart("let me check"), toolReq("wait", "r1", map[string]any{"id": "a"}), toolReq("wait", "r2", map[string]any{"id": "b"})).
		ReplyText("both done")
	resp, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("go"), agent.WithTools(slow))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "both done" {
		t.Fatalf("text = %q", resp.Text())
	}
	second := m.Requests()[1]
	if len(second.Messages) != 3 {
		t.Fatalf("second request has %d messages", len(second.Messages))
	}
	toolMsg := second.Messages[2]
	if toolMsg.Role != abi.RoleTool || len(toolMsg.Content) != 2 {
		t.Fatalf("tool message = %s", toJSONString(t, toolMsg))
	}
	for i, want := range []struct{ ref, out string }{{"r1", "done a"}, {"r2", "done b"}} {
		tr := toolMsg.Content[i].ToolResponse
		if tr.Name != "wait" || tr.Ref != want.ref || tr.Output != want.out {
			t.Errorf("response %d = %+v", i, tr)
		}
	}
	if second.Tools[0].Name != "wait" || second.Tools[0].InputSchema["type"] != "object" {
		t.Errorf("tool definition = %s", toJSONString(t, second.Tools[0]))
	}
}

func TestGenerateToolErrors(t *testing.T) {
	failing := agent.NewTool("boom", "fails", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("disk on fire")
	})
	cases := []struct {
		name  string
		req   *abi.Part
		is    error
		parts []string
	}{
		{"unknown tool", toolReq("nope", "1", map[string]any{}), agent.ErrUnknownTool, []string{`"nope"`, "test/tools", `"add"`}},
		{"invalid input", toolReq("add", "1", map[string]any{"a": "one", "b": 2}), agent.ErrInvalidToolInput, []string{`"add"`, "/a"}},
		{"missing input field", toolReq("add", "1", map[string]any{"a": 1}), agent.ErrInvalidToolInput, []string{`"add"`, "'b'"}},
		{"tool failure", toolReq("boom", "1", nil), agent.ErrToolFailed, []string{`"boom"`, "disk on fire"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			m := testmodel.New("test/tools").Reply(c.req).ReplyText("unreachable")
			_, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithTools(newAdd(&calls), failing))
			if !errors.Is(err, c.is) {
				t.Fatalf("err = %v, want %v", err, c.is)
			}
			for _, p := range c.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not mention %s", err, p)
				}
			}
			if calls.Load() != 0 {
				t.Error("the tool ran despite the error")
			}
		})
	}
}

func TestGenerateMaxTurns(t *testing.T) {
	m := testmodel.New("test/loopy", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelMessage(toolReq("add", "", map[string]any{"a": 1, "b": 1}))}}
	}))
	var calls atomic.Int32
	_, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithTools(newAdd(&calls)), agent.WithMaxTurns(3))
	if !errors.Is(err, agent.ErrMaxTurns) || !strings.Contains(err.Error(), "3 rounds") {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 3 || len(m.Requests()) != 4 {
		t.Errorf("tool ran %d times over %d model calls, want 3 over 4", calls.Load(), len(m.Requests()))
	}
}

func TestGenerateReturnToolRequests(t *testing.T) {
	var calls atomic.Int32
	m := testmodel.New("test/ret").Reply(toolReq("add", "1", map[string]any{"a": 1, "b": 2}))
	resp, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithTools(newAdd(&calls)), agent.WithReturnToolRequests(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolRequests()) != 1 || calls.Load() != 0 {
		t.Errorf("tool requests = %v, calls = %d", resp.ToolRequests(), calls.Load())
	}
}

func TestGenerateStreamIndexesRolesAndPartialToolRequests(t *testing.T) {
	m := testmodel.New("test/stream").Push(
		testmodel.Turn{
			// A model that streams a tool call in pieces and leaves the message to be
			// built from the chunks.
			Chunks: []*abi.GenerateResponseChunk{
				{Content: []*abi.Part{abi.NewTextPart("Adding")}},
				{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "c1", Input: `{"a": 2,`, Partial: true})}},
				{Content: []*abi.Part{abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "c1", Input: ` "b": 3}`, Partial: true})}},
			},
			Response: &abi.GenerateResponse{FinishReason: abi.FinishStop},
		},
		testmodel.Turn{
			Chunks:   []*abi.GenerateResponseChunk{{Content: []*abi.Part{abi.NewTextPart("It is ")}}, {Content: []*abi.Part{abi.NewTextPart("5.")}}},
			Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("It is 5."), FinishReason: abi.FinishStop},
		},
	)
	var got []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("2+3?"), agent.WithTools(newAdd(nil))) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		got = append(got, fmt.Sprintf("%d/%s/%s", v.Chunk.Index, v.Chunk.Role, v.Chunk.Content[0].Kind))
	}
	want := []string{"0/model/text", "0/model/toolRequest", "0/model/toolRequest", "1/tool/toolResponse", "2/model/text", "2/model/text"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %v\nwant     %v", got, want)
	}
	if final == nil || final.Text() != "It is 5." {
		t.Fatalf("final = %v", final)
	}
	hist := m.Requests()[1].Messages
	tr := hist[1].ToolRequests()
	if len(tr) != 1 || tr[0].Partial || !reflect.DeepEqual(tr[0].Input, map[string]any{"a": 2.0, "b": 3.0}) {
		t.Errorf("accumulated tool request = %s", toJSONString(t, hist[1]))
	}
	if out := hist[2].Content[0].ToolResponse.Output; out != 5.0 {
		t.Errorf("tool output = %v", out)
	}
}

func TestGenerateStreamBreakCancels(t *testing.T) {
	chunks := make([]*abi.GenerateResponseChunk, 100)
	for i := range chunks {
		chunks[i] = &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart("x")}}
	}
	m := testmodel.New("test/long").Push(testmodel.Turn{Chunks: chunks, Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("done")}})
	n := 0
	for range agent.GenerateStream(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x")) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("received %d values", n)
	}
	// A model error reaches the loop as an error value.
	bad := testmodel.New("test/err").Push(testmodel.Turn{Err: errors.New("overloaded")})
	var gotErr error
	for _, err := range agent.GenerateStream(context.Background(), nil, agent.WithModel(bad), agent.WithPrompt("x")) {
		gotErr = err
	}
	if gotErr == nil || !strings.Contains(gotErr.Error(), "overloaded") {
		t.Errorf("err = %v", gotErr)
	}
}

// TestGenerateStreamLateChunk: a chunk a model delivers after its call returned (the
// plugin host hands on a chunk the caller took too late) is refused, not yielded into
// a loop that has ended.
func TestGenerateStreamLateChunk(t *testing.T) {
	var late agent.ModelStreamCallback
	m := agent.NewModel("test/late", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		late = cb
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage("done")}, nil
	})
	for range agent.GenerateStream(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x")) {
	}
	if err := late(context.Background(), &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart("late")}}); err == nil {
		t.Error("a chunk after the end of the stream was taken")
	}
}

func TestMiddlewareOrderAndLayers(t *testing.T) {
	var log []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	mw := func(name string) agent.Middleware {
		return agent.Middleware{
			Generate: func(next agent.GenerateFunc) agent.GenerateFunc {
				return func(ctx context.Context, o *abi.GenerateActionOptions) (*abi.GenerateResponse, error) {
					note(name + " generate " + o.Model)
					return next(ctx, o)
				}
			},
			Model: func(m agent.Model, next agent.ModelFunc) agent.ModelFunc {
				return func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
					note(name + " model " + m.Name())
					return next(ctx, req, cb)
				}
			},
			Tool: func(tool agent.Tool, next agent.ToolFunc) agent.ToolFunc {
				return func(ctx context.Context, in any) (any, error) {
					note(name + " tool " + tool.Name())
					return next(ctx, in)
				}
			},
		}
	}
	m := testmodel.New("test/mw").Reply(toolReq("add", "1", map[string]any{"a": 1, "b": 1})).ReplyText("2")
	if _, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithTools(newAdd(nil)), agent.WithMiddleware(mw("outer"), mw("inner"))); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"outer generate test/mw", "inner generate test/mw",
		"outer model test/mw", "inner model test/mw",
		"outer tool add", "inner tool add",
		"outer model test/mw", "inner model test/mw",
	}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("log = %v", log)
	}

	// A model middleware can retry; WrapModel attaches it to the model itself.
	flaky := testmodel.New("test/flaky").Push(testmodel.Turn{Err: errors.New("503")}).ReplyText("recovered")
	retry := agent.Middleware{Model: func(m agent.Model, next agent.ModelFunc) agent.ModelFunc {
		return func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
			resp, err := next(ctx, req, cb)
			if err != nil {
				return next(ctx, req, cb)
			}
			return resp, err
		}
	}}
	text, err := agent.GenerateText(context.Background(), nil, agent.WithModel(agent.WrapModel(flaky, retry)), agent.WithPrompt("x"))
	if err != nil || text != "recovered" {
		t.Errorf("retry: %q, %v", text, err)
	}
}

func TestInterruptAndResume(t *testing.T) {
	var transfers atomic.Int32
	transfer := agent.NewTool("transfer", "moves money; needs approval", func(ctx context.Context, in struct {
		Amount int `json:"amount"`
	}) (string, error) {
		md, resumed := agent.Resumed(ctx)
		if !resumed {
			return "", agent.Interrupt(map[string]any{"ask": fmt.Sprintf("approve %d?", in.Amount)})
		}
		if md["approved"] != true {
			return "declined", nil
		}
		transfers.Add(1)
		return fmt.Sprintf("sent %d", in.Amount), nil
	})
	ask := agent.NewTool("ask", "asks the user", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "", agent.Interrupt(nil)
	})
	newModel := func() *testmodel.Model {
		return testmodel.New("test/bank").Reply(
			toolReq("transfer", "t1", map[string]any{"amount": 10}),
			toolReq("add", "a1", map[string]any{"a": 1, "b": 2}),
			toolReq("ask", "q1", map[string]any{"q": "which account?"}),
		).ReplyText("all done")
	}
	tools := agent.WithTools(transfer, ask, newAdd(nil))
	m := newModel()
	resp, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("pay"), tools)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != abi.FinishInterrupted {
		t.Fatalf("finish = %s", resp.FinishReason)
	}
	parts := resp.Message.Content
	if md := parts[0].Metadata["interrupt"]; !reflect.DeepEqual(md, map[string]any{"ask": "approve 10?"}) {
		t.Errorf("transfer interrupt = %v", md)
	}
	if parts[1].Metadata["pendingOutput"] != 3 {
		t.Errorf("add pending output = %v", parts[1].Metadata)
	}
	if parts[2].Metadata["interrupt"] != true {
		t.Errorf("ask interrupt = %v", parts[2].Metadata)
	}
	history := append(append([]*abi.Message(nil), resp.Request.Messages...), resp.Message)

	approve := abi.NewToolRequestPart(&abi.ToolRequest{Name: "transfer", Ref: "t1", Input: map[string]any{"amount": 10}})
	approve.Metadata = map[string]any{"resumed": map[string]any{"approved": true}}
	answer := abi.NewToolResponsePart(&abi.ToolResponse{Name: "ask", Ref: "q1", Output: "savings"})

	bad := map[string][]agent.GenerateOption{
		"unknown ref":    {agent.WithToolResponses(abi.NewToolResponsePart(&abi.ToolResponse{Name: "ask", Ref: "zzz", Output: 1})), agent.WithToolRestarts(approve)},
		"forged name":    {agent.WithToolResponses(abi.NewToolResponsePart(&abi.ToolResponse{Name: "transfer", Ref: "q1", Output: 1})), agent.WithToolRestarts(approve)},
		"answered twice": {agent.WithToolResponses(answer, answer), agent.WithToolRestarts(approve)},
		"still waiting":  {agent.WithToolResponses(answer)},
		"not waiting":    {agent.WithToolResponses(answer, abi.NewToolResponsePart(&abi.ToolResponse{Name: "add", Ref: "a1", Output: 99})), agent.WithToolRestarts(approve)},
		"wrong kind":     {agent.WithToolResponses(abi.NewTextPart("yes"))},
	}
	for name, opts := range bad {
		before := toJSONString(t, history)
		m2 := newModel()
		_, err := agent.Generate(context.Background(), nil, append([]agent.GenerateOption{agent.WithModel(m2), agent.WithMessages(history...), tools}, opts...)...)
		if !errors.Is(err, agent.ErrInvalidResume) {
			t.Errorf("%s: err = %v, want ErrInvalidResume", name, err)
		}
		if transfers.Load() != 0 || len(m2.Requests()) != 0 || toJSONString(t, history) != before {
			t.Errorf("%s: a rejected resume changed something", name)
		}
	}

	final, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithMessages(history...), tools,
		agent.WithToolResponses(answer), agent.WithToolRestarts(approve))
	if err != nil {
		t.Fatal(err)
	}
	if final.Text() != "all done" || transfers.Load() != 1 {
		t.Fatalf("final = %q, transfers = %d", final.Text(), transfers.Load())
	}
	sent := m.LastRequest().Messages
	toolMsg := sent[len(sent)-1]
	outs := []any{}
	for _, p := range toolMsg.Content {
		outs = append(outs, p.ToolResponse.Output)
	}
	if !reflect.DeepEqual(outs, []any{"sent 10", 3.0, "savings"}) {
		t.Errorf("tool outputs = %v", outs)
	}
	if toolMsg.Content[2].Metadata["interruptResponse"] != true {
		t.Error("client response not marked")
	}
	modelMsg := sent[len(sent)-2]
	if _, ok := modelMsg.Content[0].Metadata["interrupt"]; ok || modelMsg.Content[0].Metadata["resolvedInterrupt"] == nil {
		t.Errorf("interrupt not marked resolved: %v", modelMsg.Content[0].Metadata)
	}
	// The same history cannot be resumed twice once answered.
	answered := append(sent, final.Message)
	_, err = agent.Generate(context.Background(), nil, agent.WithModel(newModel()), agent.WithMessages(answered...), tools, agent.WithToolResponses(answer))
	if !errors.Is(err, agent.ErrInvalidResume) {
		t.Errorf("resuming an answered conversation: %v", err)
	}
}

func toJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestToolInputSchemaIsEachDefinitions: two tools of one name, with different input
// schemas (a plugin before and after a reload, say), each check their own, though a
// tool's compiled schema is kept from one call to the next.
func TestToolInputSchemaIsEachDefinitions(t *testing.T) {
	type num struct {
		N int `json:"n"`
	}
	type text struct {
		N string `json:"n"`
	}
	asNum := agent.NewTool("t", "takes a number", func(ctx context.Context, in num) (int, error) { return in.N, nil })
	asText := agent.NewTool("t", "takes a text", func(ctx context.Context, in text) (string, error) { return in.N, nil })
	for _, c := range []struct {
		tool  agent.Tool
		input any
		ok    bool
	}{{asNum, 1, true}, {asText, 1, false}, {asText, "one", true}, {asNum, "one", false}} {
		m := testmodel.New("test/t").Reply(toolReq("t", "1", map[string]any{"n": c.input})).ReplyText("done")
		_, err := agent.Generate(context.Background(), nil, agent.WithModel(m), agent.WithPrompt("x"), agent.WithTools(c.tool))
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, agent.ErrInvalidToolInput)) {
			t.Errorf("%s with %v: %v", c.tool.Definition().Description, c.input, err)
		}
	}
}
