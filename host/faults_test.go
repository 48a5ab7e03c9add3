package host_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/host"
)

func runTool(ctx context.Context, r *agent.Registry, name string) (any, error) {
	t, err := r.LookupTool(name)
	if err != nil {
		return nil, err
	}
	return t.Run(ctx, map[string]any{})
}

func TestFaultsAreContained(t *testing.T) { forEachEngine(t, testFaultsAreContained) }

func testFaultsAreContained(t *testing.T, engine host.Option) {
	h, r := newHost(t, engine)
	p := load(t, h, "testdata/misbehave", host.Manifest{Timeout: host.Duration{Duration: 2 * time.Second}, MemoryPages: 512})
	ctx := context.Background()
	cases := []struct {
		tool     string
		fault    bool   // the plugin failed (rather than reported an error)
		contains string // in the error message
	}{
		{"panic", true, "deliberate panic"},
		{"loop", true, "timed out after 2s"},
		{"oom", true, "plugin fault"},
		{"badjson", true, "invalid output"},
		{"huge", true, "plugin fault"},
		{"error", false, "plain text, not JSON"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			_, err := runTool(ctx, r, "misbehave/"+c.tool)
			var ce *host.CallError
			if !errors.As(err, &ce) || ce.Plugin != "misbehave" || ce.Export != plugin.ExportCallTool {
				t.Fatalf("err = %v, want a CallError naming plugin and export", err)
			}
			if errors.Is(err, host.ErrPluginFault) != c.fault || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("err = %v (fault: %v), want fault %v mentioning %q", err, errors.Is(err, host.ErrPluginFault), c.fault, c.contains)
			}
			if !strings.Contains(err.Error(), "plugin misbehave: terrarium_call_tool") {
				t.Errorf("error does not name plugin and export: %v", err)
			}
			// The host still serves the next call.
			out, err := runTool(ctx, r, "misbehave/ok")
			if err != nil || out != "fine" {
				t.Errorf("next call: %v, %v", out, err)
			}
			if live, _ := p.Instances(); live < 1 || live > 4 {
				t.Errorf("%d live instances", live)
			}
		})
	}

	// With a memory grant big enough for it, a 17 MiB output is refused for its size.
	h2, r2 := newHost(t, engine)
	load(t, h2, "testdata/misbehave", host.Manifest{MemoryPages: 8192})
	if _, err := runTool(ctx, r2, "misbehave/huge"); !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("huge output with memory to spare: %v", err)
	}
}

// TestLoopingGuestLetsTheCollectorRun: a guest looping without calls is stopped at its
// timeout while garbage collections start one after another. wazero's compiled code
// cannot be preempted by Go's scheduler: a guest that never entered Go would hold a
// collection's stop-the-world forever, and the whole process with it (the native
// engine's guests call the host every thousand loop passes for this, issue 16). Such a
// freeze stops hangGuard's timer too: go test kills the binary a minute after its
// -timeout (as it did with the calls taken out of the rewrite).
func TestLoopingGuestLetsTheCollectorRun(t *testing.T) {
	forEachEngine(t, testLoopingGuestLetsTheCollectorRun)
}

func testLoopingGuestLetsTheCollectorRun(t *testing.T, engine host.Option) {
	h, r := newHost(t, engine)
	load(t, h, "testdata/misbehave", host.Manifest{Timeout: seconds(1)})
	stop, collecting := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(collecting)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	err := returns(t, "a looping call under garbage collections", func() error {
		_, err := runTool(context.Background(), r, "misbehave/loop")
		return err
	})
	close(stop)
	<-collecting
	if !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "timed out after 1s") {
		t.Errorf("loop: %v, want a fault for the timeout", err)
	}
}

func TestLoadRejects(t *testing.T) { forEachEngine(t, testLoadRejects) }

func testLoadRejects(t *testing.T, engine host.Option) {
	h, _ := newHost(t, engine)
	ctx := context.Background()
	_, err := h.Load(ctx, wasm(t, "testdata/noexport"), host.Manifest{})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "does not export terrarium_call_tool") || !strings.Contains(err.Error(), "noexport") {
		t.Errorf("missing export: %v", err)
	}
	_, err = h.Load(ctx, wasm(t, "testdata/misbehave"), host.Manifest{Config: map[string]string{"mode": "abi"}})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "ABI version 99") {
		t.Errorf("unsupported ABI: %v", err)
	}
	_, err = h.Load(ctx, []byte("not wasm at all"), host.Manifest{})
	if !errors.Is(err, host.ErrLoad) {
		t.Errorf("garbage: %v", err)
	}
	calc := wasm(t, "../plugins/calculator")
	_, err = h.Load(ctx, calc, host.Manifest{SHA256: strings.Repeat("0", 64)})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "pins") {
		t.Errorf("wrong pin: %v", err)
	}
	p, err := h.Load(ctx, calc, host.Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	pinned := p.SHA256()
	p.Unload(ctx)
	if _, err := h.Load(ctx, calc, host.Manifest{SHA256: pinned}); err != nil {
		t.Errorf("right pin: %v", err)
	}
	if _, err := h.Load(ctx, calc, host.Manifest{}); !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("loading twice: %v", err)
	}
	if _, err := h.Load(ctx, calc, host.Manifest{State: "admin"}); !errors.Is(err, host.ErrLoad) {
		t.Errorf("bad manifest: %v", err)
	}
}

func TestWaitingForAnInstanceHonoursTheContext(t *testing.T) {
	forEachEngine(t, testWaitingForAnInstanceHonoursTheContext)
}

func testWaitingForAnInstanceHonoursTheContext(t *testing.T, engine host.Option) {
	_, r, logs := misbehaving(t, host.Manifest{MaxInstances: 1, Timeout: seconds(1.5)}, engine)
	sleeping := logs.logged("sleeping")
	busy := make(chan error, 1)
	go func() {
		_, err := runTool(context.Background(), r, "misbehave/sleep")
		busy <- err
	}()
	select {
	case <-sleeping: // the sleeper holds the only instance
	case err := <-busy:
		t.Fatalf("the sleeper ended before it slept: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// A wait that ignored its context would last until the sleeper timed out, then
	// succeed.
	err := returns(t, "the waiting call", func() error { _, err := runTool(ctx, r, "misbehave/ok"); return err })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call: %v", err)
	}
	if err := <-busy; !strings.Contains(fmt.Sprint(err), "timed out") {
		t.Errorf("sleeping call: %v", err)
	}
	if out, err := runTool(context.Background(), r, "misbehave/ok"); err != nil || out != "fine" {
		t.Errorf("after the timeout: %v, %v", out, err)
	}
}

// TestFaultInATurnDamagesNoSnapshot: a plugin that crashes in the middle of a turn (its
// tool errors failing the turn) fails that turn; earlier snapshots stay intact, the
// failed turn's holds the last good state, and the session goes on from it.
func TestFaultInATurnDamagesNoSnapshot(t *testing.T) {
	forEachEngine(t, testFaultInATurnDamagesNoSnapshot)
}

func testFaultInATurnDamagesNoSnapshot(t *testing.T, engine host.Option) {
	h, r := newHost(t, engine)
	load(t, h, "testdata/misbehave", host.Manifest{})
	load(t, h, "../plugins/scratchpad", host.Manifest{State: plugin.StateWrite})
	testmodel.Define(r, "test/faulty").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "scratchpad/note", Ref: "1", Input: map[string]any{"text": "keep me"}})).
		ReplyText("noted").
		Reply(abi.NewToolRequestPart(&abi.ToolRequest{Name: "misbehave/panic", Ref: "2", Input: map[string]any{}})).
		ReplyText("after the failure")
	snaps := session.NewInMemorySnapshotStore[Notes]()
	a := session.DefineAgent[struct{}, Notes](r, "faulty",
		session.WithGenerateOpts[Notes](agent.WithModelName("test/faulty"), agent.WithToolNames("scratchpad/note", "misbehave/panic"),
			agent.WithReturnToolErrors(false)),
		session.WithSnapshotStore(snaps))
	ctx := context.Background()
	conn, _ := a.StreamBidi(ctx)
	conn.SendText("note it")
	var good string
	for c, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
		if c.SnapshotCreated != "" {
			good = c.SnapshotCreated
		}
	}
	conn.SendText("now crash")
	var turnErr error
	var failed string
	for c, err := range conn.Receive() {
		if err != nil {
			turnErr = err
		}
		if c != nil && c.SnapshotCreated != "" {
			failed = c.SnapshotCreated
		}
	}
	if !errors.Is(turnErr, host.ErrPluginFault) || !strings.Contains(turnErr.Error(), "plugin misbehave: terrarium_call_tool") {
		t.Fatalf("faulty turn: %v", turnErr)
	}
	for _, id := range []string{good, failed} {
		snap, err := snaps.GetSnapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.State.Custom.Scratchpad) != 1 || len(snap.State.Messages) != 4 {
			t.Errorf("snapshot %s (%s) = %+v", id, snap.Status, snap.State)
		}
	}
	// The connection survived the failed turn.
	conn.SendText("hello again")
	for _, err := range conn.Receive() {
		if err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil || out.Message == nil || out.Message.Text() != "after the failure" {
		t.Errorf("after the failed turn: %v, %v", out, err)
	}
	last, err := snaps.GetSnapshot(ctx, out.SnapshotID)
	if err != nil || len(last.State.Messages) != 6 || last.ParentID != failed {
		t.Errorf("the session after the failed turn: %+v, %v", last, err)
	}
}

// TestConcurrentSessionsShareOnePool: 32 sessions use one plugin's pool at once; each
// session's state holds its own notes and nobody else's.
func TestConcurrentSessionsShareOnePool(t *testing.T) {
	forEachEngine(t, testConcurrentSessionsShareOnePool)
}

func testConcurrentSessionsShareOnePool(t *testing.T, engine host.Option) {
	h, r := newHost(t, engine)
	p := load(t, h, "../plugins/scratchpad", host.Manifest{State: plugin.StateWrite, MaxInstances: 4})
	testmodel.Define(r, "test/notes", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == abi.RoleTool {
			return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage("noted")}}
		}
		text := strings.TrimPrefix(last.Text(), "remember ")
		var parts []*abi.Part
		for i := range 3 {
			parts = append(parts, abi.NewToolRequestPart(&abi.ToolRequest{Name: "scratchpad/note", Ref: fmt.Sprint(i), Input: map[string]any{"text": fmt.Sprintf("%s-%d", text, i)}}))
		}
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelMessage(parts...)}}
	}))
	a := session.DefineAgent[struct{}, Notes](r, "notes",
		session.WithGenerateOpts[Notes](agent.WithModelName("test/notes"), agent.WithToolNames("scratchpad/note")))
	const sessions = 32
	var wg sync.WaitGroup
	results := make([]*session.SessionFlowOutput[Notes], sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := a.StreamBidi(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for turn := range 2 {
				conn.SendText(fmt.Sprintf("remember s%d-t%d", i, turn))
				for _, err := range conn.Receive() {
					if err != nil {
						t.Error(err)
					}
				}
			}
			conn.Close()
			out, err := conn.Output()
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = out
		}()
	}
	wg.Wait()
	for i, out := range results {
		if out == nil {
			continue
		}
		notes := out.State.Custom.Scratchpad
		if len(notes) != 6 {
			t.Errorf("session %d has %d notes: %v", i, len(notes), notes)
		}
		for _, n := range notes {
			if !strings.HasPrefix(n, fmt.Sprintf("s%d-", i)) {
				t.Errorf("session %d holds another session's note %q", i, n)
			}
		}
	}
	if live, _ := p.Instances(); live > 4 {
		t.Errorf("%d instances, the manifest allows 4", live)
	}
}

func TestDescriptorProblems(t *testing.T) {
	good := &plugin.Descriptor{ABI: plugin.Version, Name: "p", Capabilities: plugin.Capabilities{
		State: plugin.StateWrite, HTTP: []string{"api.example.com", "127.0.0.1", "*.example.org", "::1", "127.0.0.1:8080", "[::1]:8080", "*.example.org:8443"},
		Config: []string{"baseURL"}, Secrets: []string{"KEY"},
	}, Models: []plugin.ModelDescriptor{{Name: "meta-llama/llama-3:8b"}}}
	if p := host.DescriptorProblems(good); len(p) != 0 {
		t.Errorf("a valid descriptor has problems: %v", p)
	}
	bad := &plugin.Descriptor{ABI: 7, Name: "Bad Name", Capabilities: plugin.Capabilities{HTTP: []string{"http://x.com/"}, Secrets: []string{"{{x}}"}}}
	cats := map[string]bool{}
	for _, p := range host.DescriptorProblems(bad) {
		cats[p.Category] = true
	}
	for _, c := range []string{host.ProblemABI, host.ProblemNames, host.ProblemCapabilities} {
		if !cats[c] {
			t.Errorf("no %s problem found in %+v", c, bad)
		}
	}
	for _, h := range []string{"http://x.com/", "x.com:0", "x.com:99999", "x.com:080", "x.com:http", "user@x.com", "x.com/path", "", "*.", "[::1]"} {
		d := &plugin.Descriptor{ABI: plugin.Version, Name: "p", Capabilities: plugin.Capabilities{HTTP: []string{h}}}
		if p := host.DescriptorProblems(d); len(p) != 1 || p[0].Category != host.ProblemCapabilities {
			t.Errorf("http %q: problems %v", h, p)
		}
	}
}

// A call's return code and the error it set mean together what ABI.md (section 2,
// Errors) says: a non-empty error set is the plugin's error whatever the code (never
// dropped for a 0); a code not 0 without one is the plugin's fault, its output unread;
// an empty error is none.
func TestReturnCodeAndError(t *testing.T) { forEachEngine(t, testReturnCodeAndError) }

func testReturnCodeAndError(t *testing.T, engine host.Option) {
	h, r := newHost(t, engine)
	load(t, h, "testdata/misbehave", host.Manifest{})
	cases := []struct {
		input map[string]any
		want  string // the error, or the output if it is empty
		fault bool
	}{
		{map[string]any{"rc": 0, "output": `{"output":"fine"}`}, "", false},
		{map[string]any{"rc": 0, "output": `{"output":"fine"}`, "error": `{"code":"unavailable","message":"down"}`},
			"plugin misbehave: terrarium_call_tool: unavailable: down", false},
		{map[string]any{"rc": 1, "error": "plain text"}, "plugin misbehave: terrarium_call_tool: internal: plain text", false},
		{map[string]any{"rc": 1, "output": `{"output":"fine"}`},
			"plugin misbehave: terrarium_call_tool: plugin fault: terrarium_call_tool returned 1 without setting an error", true},
		{map[string]any{"rc": -1, "error": ""},
			"plugin misbehave: terrarium_call_tool: plugin fault: terrarium_call_tool returned -1 without setting an error", true},
		{map[string]any{"rc": 0, "output": `{"output":"fine"}`, "error": ""}, "", false},
	}
	for _, c := range cases {
		out, err := runWith(context.Background(), r, "misbehave/returns", c.input)
		switch {
		case c.want == "" && (err != nil || out != "fine"):
			t.Errorf("%v: got %v, %v; want the output", c.input, out, err)
		case c.want != "" && (err == nil || err.Error() != c.want || errors.Is(err, host.ErrPluginFault) != c.fault):
			t.Errorf("%v: got %v, %v; want the error %q (fault: %v)", c.input, out, err, c.want, c.fault)
		}
	}
}
