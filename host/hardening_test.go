package host_test

// The attacks of issue 19, one test each: every plugin fault bounded, secrets bound
// to hosts, input the host must not trust refused.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// hangGuard bounds a call that must end on its own: far above the bound under test, it
// turns a hang into a failure instead of a stuck test binary.
const hangGuard = 30 * time.Second

// returns runs f and fails the test if it has not returned within hangGuard.
func returns[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("%s still running after %v", what, hangGuard)
		panic("unreachable")
	}
}

// pluginLogs is a slog handler that keeps the records of plugin log calls and tells
// waiters when a plugin logged a given text: the handshake that a call got that far.
type pluginLogs struct {
	mu      sync.Mutex
	records []slog.Record
	waiters map[string]chan struct{}
}

func newPluginLogs() *pluginLogs { return &pluginLogs{waiters: map[string]chan struct{}{}} }

// logged returns a channel closed once a plugin logs text.
func (l *pluginLogs) logged(text string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.waiters[text]; !ok {
		l.waiters[text] = make(chan struct{})
	}
	return l.waiters[text]
}

// text is what the plugin logged in r: its message attribute, or (before the host
// structured plugin logs) the record's message.
func text(r slog.Record) string {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "message" {
			s = a.Value.String()
			return false
		}
		return true
	})
	return s
}

func (l *pluginLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *pluginLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *pluginLogs) WithGroup(string) slog.Handler            { return l }
func (l *pluginLogs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	t := text(r)
	if _, ok := l.waiters[t]; !ok {
		l.waiters[t] = make(chan struct{})
	}
	select {
	case <-l.waiters[t]:
	default:
		close(l.waiters[t])
	}
	return nil
}

// count reports how many records have the message msg, and the sum of their attribute
// key (0 where absent).
func (l *pluginLogs) count(msg, key string) (n int, sum int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				sum += a.Value.Int64()
			}
			return true
		})
	}
	return n, sum
}

func misbehaving(t *testing.T, m host.Manifest, opts ...host.Option) (*host.Plugin, *agent.Registry, *pluginLogs) {
	t.Helper()
	logs := newPluginLogs()
	h, r := newHost(t, append(opts, host.WithLogger(slog.New(logs)))...)
	return load(t, h, "testdata/misbehave", m), r, logs
}

func runWith(ctx context.Context, r *agent.Registry, name string, input map[string]any) (any, error) {
	t, err := r.LookupTool(name)
	if err != nil {
		return nil, err
	}
	return t.Run(ctx, input)
}

func seconds(s float64) host.Duration {
	return host.Duration{Duration: time.Duration(s * float64(time.Second))}
}

// Item 1: a guest that sleeps in WASI (Go's time.Sleep, or poll_oneoff called
// directly) is ended at its timeout, and at its caller's deadline.
func TestSleepingPluginEndsAtItsTimeout(t *testing.T) {
	forEachEngine(t, testSleepingPluginEndsAtItsTimeout)
}

func testSleepingPluginEndsAtItsTimeout(t *testing.T, engine host.Option) {
	_, r, _ := misbehaving(t, host.Manifest{Timeout: seconds(1), MaxInstances: 1}, engine)
	for _, tool := range []string{"sleep", "poll"} {
		err := returns(t, tool, func() error { _, err := runTool(context.Background(), r, "misbehave/"+tool); return err })
		if !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "timed out after 1s") {
			t.Errorf("%s: %v, want a timeout", tool, err)
		}
	}
	if out, err := runTool(context.Background(), r, "misbehave/ok"); out != "fine" {
		t.Errorf("after the sleeps: %v, %v", out, err)
	}

	_, r, logs := misbehaving(t, host.Manifest{Timeout: seconds(600)}, engine)
	for _, tool := range []string{"sleep", "poll"} {
		ctx, cancel := context.WithCancel(context.Background())
		entered := logs.logged(map[string]string{"sleep": "sleeping", "poll": "polling"}[tool])
		go func() { <-entered; cancel() }()
		err := returns(t, tool, func() error { _, err := runTool(ctx, r, "misbehave/"+tool); return err })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s cancelled by its caller: %v", tool, err)
		}
	}
}

// Item 2: a caller that stops reading a plugin model's stream holds no instance past
// the call's timeout, and its call fails.
func TestStalledStreamConsumerFreesTheInstance(t *testing.T) {
	forEachEngine(t, testStalledStreamConsumerFreesTheInstance)
}

func testStalledStreamConsumerFreesTheInstance(t *testing.T, engine host.Option) {
	_, r, _ := misbehaving(t, host.Manifest{Timeout: seconds(1), MaxInstances: 1}, engine)
	model, err := r.LookupModel("misbehave/streamer")
	if err != nil {
		t.Fatal(err)
	}
	stalled, first := make(chan struct{}), make(chan struct{})
	defer close(stalled)
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := model.Generate(context.Background(), &abi.GenerateRequest{Messages: []*abi.Message{abi.NewUserTextMessage("hi")}},
			func(ctx context.Context, c *abi.GenerateResponseChunk) error {
				once.Do(func() { close(first) })
				<-stalled // a client that never reads
				return nil
			})
		done <- err
	}()
	<-first
	if out, err := runTool(context.Background(), r, "misbehave/ok"); out != "fine" {
		t.Fatalf("another caller while the stream is stalled: %v, %v", out, err)
	}
	err = returns(t, "the stalled call", func() error { return <-done })
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "did not take the streamed chunks") {
		t.Errorf("the stalled call: %v", err)
	}
}

// Item 3: the wait for an instance is not charged to the call: a call that waited
// most of its timeout for a busy instance still has its whole timeout to run.
func TestQueueTimeIsNotChargedToTheCall(t *testing.T) {
	forEachEngine(t, testQueueTimeIsNotChargedToTheCall)
}

func testQueueTimeIsNotChargedToTheCall(t *testing.T, engine host.Option) {
	_, r, logs := misbehaving(t, host.Manifest{Timeout: seconds(2), MaxInstances: 1}, engine)
	sleep := map[string]any{"ms": 1500}
	entered := logs.logged("sleeping")
	first := make(chan error, 1)
	go func() {
		_, err := runWith(context.Background(), r, "misbehave/sleep", sleep)
		first <- err
	}()
	<-entered
	// This call waits 1.5 s for the instance, then runs 1.5 s: 3 s, each part within 2 s.
	if out, err := runWith(context.Background(), r, "misbehave/sleep", sleep); out != "slept" {
		t.Errorf("the call that waited: %v, %v", out, err)
	}
	if err := <-first; err != nil {
		t.Errorf("the first call: %v", err)
	}

	// A wait beyond its own bound fails with ErrNoInstance, not as the plugin's fault.
	_, r, logs = misbehaving(t, host.Manifest{Timeout: seconds(60), MaxInstances: 1, QueueTimeout: seconds(0.2)}, engine)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered = logs.logged("sleeping")
	go runTool(ctx, r, "misbehave/sleep")
	<-entered
	_, err := runTool(context.Background(), r, "misbehave/ok")
	if !errors.Is(err, host.ErrNoInstance) || errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "within 200ms") {
		t.Errorf("waiting past the queue timeout: %v", err)
	}
}

// loopingStart is a module whose start function loops forever (exported as
// terrarium_describe, so that it passes the checks before instantiating):
// (module (func (export "terrarium_describe") (loop (br 0))) (start 0)).
var loopingStart = append([]byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: func () -> ()
	0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
	0x07, 0x16, 0x01, 0x12}, append([]byte("terrarium_describe"), // export section: function 0 as terrarium_describe
	0x00, 0x00,
	0x08, 0x01, 0x00, // start section: function 0
	0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // code: loop br 0 end end
)...)

// Item 4: loading is bounded: a start function that loops ends at the timeout, and a
// schema nested 5,000 levels is refused before it is compiled.
func TestLoadIsBounded(t *testing.T) { forEachEngine(t, testLoadIsBounded) }

func testLoadIsBounded(t *testing.T, engine host.Option) {
	h, _ := newHost(t, engine)
	err := returns(t, "loading a looping start function", func() error {
		_, err := h.Load(context.Background(), loopingStart, host.Manifest{Timeout: seconds(1)})
		return err
	})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "timed out after 1s") {
		t.Errorf("looping start: %v", err)
	}
	err = returns(t, "loading a deep schema", func() error {
		_, err := h.Load(context.Background(), wasm(t, "testdata/misbehave"), host.Manifest{Config: map[string]string{"mode": "deepschema"}})
		return err
	})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "nested deeper than") {
		t.Errorf("deep schema: %v", err)
	}
}

// Item 5: Unload lets the calls in flight finish, then closes the plugin.
func TestUnloadLetsCallsInFlightFinish(t *testing.T) {
	forEachEngine(t, testUnloadLetsCallsInFlightFinish)
}

// sleepingCall loads misbehave on engine and starts a call of its sleep tool for ms
// milliseconds, returning once the guest is in it; the call's error arrives on done
// (an output other than "slept" is one).
func sleepingCall(t *testing.T, engine host.Option, ms int) (p *host.Plugin, done <-chan error) {
	p, r, logs := misbehaving(t, host.Manifest{Timeout: seconds(60)}, engine)
	entered := logs.logged("sleeping")
	result := make(chan error, 1)
	go func() {
		out, err := runWith(context.Background(), r, "misbehave/sleep", map[string]any{"ms": ms})
		if err == nil && out != "slept" {
			err = fmt.Errorf("output %v", out)
		}
		result <- err
	}()
	<-entered
	return p, result
}

func testUnloadLetsCallsInFlightFinish(t *testing.T, engine host.Option) {
	p, done := sleepingCall(t, engine, 500)
	if err := p.Unload(context.Background()); err != nil {
		t.Errorf("unload: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if _, err := p.Call(context.Background(), "terrarium_describe", nil); err == nil {
		t.Error("a call after Unload succeeded")
	}
}

// Unload whose context ends first ends the calls in flight, and their errors say the
// plugin was unloaded: a guest woken in a WASI call never runs into the closed
// plugin's WASI state.
func TestUnloadEndsCallsInFlightWhenItsContextEnds(t *testing.T) {
	forEachEngine(t, testUnloadEndsCallsInFlightWhenItsContextEnds)
}

func testUnloadEndsCallsInFlightWhenItsContextEnds(t *testing.T, engine host.Option) {
	p, done := sleepingCall(t, engine, 3_600_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Unload(ctx); err == nil {
		t.Error("an Unload that ended calls in flight said nothing of them")
	}
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "unloaded") || strings.Contains(err.Error(), "nil pointer") {
		t.Errorf("the call ended by Unload: %v", err)
	}
}

// An unload whose context ends first ends a call waiting in a host function too: the
// plugin's HTTP request is cancelled, not left to the call's deadline ten minutes on.
func TestUnloadEndsACallWaitingOnTheNetwork(t *testing.T) {
	forEachEngine(t, testUnloadEndsACallWaitingOnTheNetwork)
}

func testUnloadEndsACallWaitingOnTheNetwork(t *testing.T, engine host.Option) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	api := newHTTPProbe(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(cancelled)
	})
	h, r := newHost(t, engine)
	p := load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)}, Timeout: seconds(600)})
	done := make(chan error, 1)
	go func() {
		tool, _ := r.LookupTool("hostcheck/http")
		_, err := tool.Run(context.Background(), map[string]any{"url": api.URL})
		done <- err
	}()
	<-arrived
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Unload(ctx)
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the plugin's request was not cancelled by the unload")
	}
	<-done
}

// Item 6: a guest that exits (even with code 0) is discarded, not put back.
func TestExitedInstanceIsDiscarded(t *testing.T) { forEachEngine(t, testExitedInstanceIsDiscarded) }

func testExitedInstanceIsDiscarded(t *testing.T, engine host.Option) {
	_, r, _ := misbehaving(t, host.Manifest{MaxInstances: 1}, engine)
	if _, err := runTool(context.Background(), r, "misbehave/exit"); !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("exit: %v", err)
	}
	if out, err := runTool(context.Background(), r, "misbehave/ok"); out != "fine" {
		t.Errorf("the next call: %v, %v", out, err)
	}
}

// Item 10: a schema's external references are refused, never loaded.
func TestDescriptorSchemaCannotReadHostFiles(t *testing.T) {
	forEachEngine(t, testDescriptorSchemaCannotReadHostFiles)
}

func testDescriptorSchemaCannotReadHostFiles(t *testing.T, engine host.Option) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	h, _ := newHost(t, engine)
	for _, path := range []string{secret, fifo} {
		ref := (&url.URL{Scheme: "file", Path: path}).String()
		err := returns(t, "loading "+ref, func() error {
			_, err := h.Load(context.Background(), wasm(t, "testdata/misbehave"), host.Manifest{Config: map[string]string{"mode": "ref", "ref": ref}})
			return err
		})
		if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "external reference") {
			t.Errorf("%s: %v", ref, err)
		}
	}
}

// Item 11: a plugin model cannot answer as the user: the turn would be stored as one.
func TestPluginModelCannotForgeUserTurns(t *testing.T) {
	forEachEngine(t, testPluginModelCannotForgeUserTurns)
}

func testPluginModelCannotForgeUserTurns(t *testing.T, engine host.Option) {
	_, r, _ := misbehaving(t, host.Manifest{}, engine)
	_, err := agent.Generate(context.Background(), r, agent.WithModelName("misbehave/forger"), agent.WithPrompt("hi"))
	if !errors.Is(err, host.ErrPluginFault) || !strings.Contains(err.Error(), `role "user"`) {
		t.Errorf("a model answering as the user: %v", err)
	}
}

// Item 12: a plugin's log line cannot forge a host log line, even under the default
// logger, which writes the message as it is.
func TestPluginLogCannotForgeLines(t *testing.T) { forEachEngine(t, testPluginLogCannotForgeLines) }

func testPluginLogCannotForgeLines(t *testing.T, engine host.Option) {
	var out bytes.Buffer
	defer log.SetOutput(log.Writer())
	defer log.SetFlags(log.Flags())
	log.SetOutput(&out)
	log.SetFlags(0)
	h, r := newHost(t, engine, host.WithLogger(slog.Default()))
	load(t, h, "testdata/hostcheck", host.Manifest{})
	out.Reset()
	wantOK(t, "log", call(t, context.Background(), r, "log", map[string]any{"text": "hello\nERROR the host is compromised plugin=other"}))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "plugin=hostcheck") {
		t.Errorf("one plugin log call wrote %d lines:\n%s", len(lines), out.String())
	}
}

// Item 12: a plugin flooding the log is cut off, and what was dropped is counted.
func TestPluginLogFloodIsRateLimited(t *testing.T) { forEachEngine(t, testPluginLogFloodIsRateLimited) }

func testPluginLogFloodIsRateLimited(t *testing.T, engine host.Option) {
	_, r, logs := misbehaving(t, host.Manifest{}, engine)
	const lines = 2_000
	if _, err := runWith(context.Background(), r, "misbehave/logflood", map[string]any{"lines": lines, "text": "flood"}); err != nil {
		t.Fatal(err)
	}
	logged, _ := logs.count("plugin log", "")
	_, dropped := logs.count("plugin log lines dropped", "dropped")
	if logged >= lines/2 || int64(logged)+dropped != lines {
		t.Errorf("%d lines logged and %d counted as dropped, of %d", logged, dropped, lines)
	}
}

// httpProbe is a server that records the headers each request brought.
type httpProbe struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHTTPProbe(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) *httpProbe {
	p := &httpProbe{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		p.mu.Unlock()
		if handler != nil {
			handler(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// saw reports whether any request to the probe carried value in any header.
func (p *httpProbe) saw(value string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.seen {
		for _, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, value) {
					return true
				}
			}
		}
	}
	return false
}

func hostPort(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Host }

// Item 7: a secret goes only to its hosts, in its header, and never across a redirect
// to another origin.
func TestSecretsAreBoundToHostsAndHeader(t *testing.T) {
	forEachEngine(t, testSecretsAreBoundToHostsAndHeader)
}

func testSecretsAreBoundToHostsAndHeader(t *testing.T, engine host.Option) {
	other := newHTTPProbe(t, nil)
	api := newHTTPProbe(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
		}
	})
	h, r := newHost(t, engine)
	load(t, h, "testdata/hostcheck", host.Manifest{
		HTTP: []string{hostPort(api.Server), hostPort(other.Server)},
		Secrets: map[string]host.Secret{
			"TOKEN": {Value: "s3cret", Hosts: []string{hostPort(api.Server)}},
			"KEY":   {Value: "k3y", Hosts: []string{hostPort(api.Server)}, Header: "X-Api-Key"},
		},
	})
	ctx := context.Background()
	fetch := func(u string, headers map[string]string) result {
		return call(t, ctx, r, "http", map[string]any{"url": u, "headers": headers})
	}
	wantOK(t, "the secret's host and header", fetch(api.URL, map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}))
	if !api.saw("Bearer s3cret") {
		t.Error("the secret did not reach its host")
	}
	wantCode(t, "another granted host", fetch(other.URL, map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}), abi.CodePermissionDenied)
	wantCode(t, "another header", fetch(api.URL, map[string]string{"X-Echo": "{{secret:TOKEN}}"}), abi.CodePermissionDenied)
	wantCode(t, "a cookie", fetch(api.URL, map[string]string{"Cookie": "t={{secret:TOKEN}}"}), abi.CodePermissionDenied)
	wantOK(t, "a custom header", fetch(api.URL, map[string]string{"x-api-key": "{{secret:KEY}}"}))
	if !api.saw("k3y") {
		t.Error("the secret did not reach its host in its header")
	}
	// A redirect to another origin, granted or not, loses the secret's header.
	for _, headers := range []map[string]string{{"Authorization": "Bearer {{secret:TOKEN}}"}, {"X-Api-Key": "{{secret:KEY}}"}} {
		wantOK(t, "redirected", fetch(api.URL+"/away", headers))
	}
	if other.saw("s3cret") || other.saw("k3y") {
		t.Errorf("a secret followed a redirect to another origin: %v", other.seen)
	}
}

// Item 7: a manifest naming no hosts for a secret binds it to the one granted host;
// with several granted hosts it must name them.
func TestSecretWithoutHosts(t *testing.T) { forEachEngine(t, testSecretWithoutHosts) }

func testSecretWithoutHosts(t *testing.T, engine host.Option) {
	api := newHTTPProbe(t, nil)
	h, r := newHost(t, engine)
	load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)}, Secrets: map[string]host.Secret{"TOKEN": {Value: "s3cret"}}})
	wantOK(t, "the one granted host", call(t, context.Background(), r, "http", map[string]any{"url": api.URL, "headers": map[string]string{"Authorization": "{{secret:TOKEN}}"}}))
	if !api.saw("s3cret") {
		t.Error("the secret did not reach the one granted host")
	}
	h, _ = newHost(t, engine)
	_, err := h.Load(context.Background(), wasm(t, "testdata/hostcheck"), host.Manifest{HTTP: []string{"a.example", "b.example"}, Secrets: map[string]host.Secret{"TOKEN": {Value: "s3cret"}}})
	if !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), `secret "TOKEN"`) {
		t.Errorf("a secret without hosts, two hosts granted: %v", err)
	}
}

// Item 8: a grant without a port reaches the scheme's default port only.
func TestGrantsHavePorts(t *testing.T) { forEachEngine(t, testGrantsHavePorts) }

func testGrantsHavePorts(t *testing.T, engine host.Option) {
	api := newHTTPProbe(t, nil)
	for _, tc := range []struct {
		grant string
		ok    bool
	}{
		{"127.0.0.1", false},
		{hostPort(api.Server), true},
		{"127.0.0.1:1", false},
	} {
		h, r := newHost(t, engine)
		load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{tc.grant}})
		res := call(t, context.Background(), r, "http", map[string]any{"url": api.URL})
		if tc.ok {
			wantOK(t, "grant "+tc.grant, res)
		} else {
			wantCode(t, "grant "+tc.grant, res, abi.CodePermissionDenied)
		}
	}
}

// A guest that loops without calling the host, whose caller gave up, is stopped
// cancelGrace after, long before the call's timeout: the guest's context watches a
// caller that can give up. The caller's reason is the answer, not the plugin's fault.
func TestLoopingGuestOfACallerGivingUpIsStopped(t *testing.T) {
	forEachEngine(t, testLoopingGuestOfACallerGivingUpIsStopped)
}

func testLoopingGuestOfACallerGivingUpIsStopped(t *testing.T, engine host.Option) {
	p, r, _ := misbehaving(t, host.Manifest{Timeout: seconds(600), MaxInstances: 1}, engine)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // before the call: the instance is idle, so the call runs all the same
	err := returns(t, "a looping call whose caller gave up", func() error {
		_, err := runTool(ctx, r, "misbehave/loop")
		return err
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, host.ErrPluginFault) {
		t.Errorf("a looping call whose caller gave up: %v", err)
	}
	if live, idle := p.Instances(); live != 0 || idle != 0 {
		t.Errorf("after the stopped guest: %d live instances, %d idle; want it discarded", live, idle)
	}
}

// Item 3: a caller giving up is not the plugin's fault: a guest waiting in a host
// function is told (the function fails), returns, and keeps its instance, so a retry
// after an attempt's timeout finds it warm.
func TestCallerGivingUpKeepsTheInstance(t *testing.T) {
	forEachEngine(t, testCallerGivingUpKeepsTheInstance)
}

func testCallerGivingUpKeepsTheInstance(t *testing.T, engine host.Option) {
	arrived := make(chan struct{})
	api := newHTTPProbe(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // until the client gives up
	})
	h, r := newHost(t, engine)
	p := load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)}, MaxInstances: 1})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	tool, _ := r.LookupTool("hostcheck/http")
	_, err := tool.Run(ctx, map[string]any{"url": api.URL})
	if !errors.Is(err, context.Canceled) || errors.Is(err, host.ErrPluginFault) {
		t.Errorf("the abandoned call: %v", err)
	}
	if live, idle := p.Instances(); live != 1 || idle != 1 {
		t.Errorf("after the caller gave up: %d live instances, %d idle; want the one kept", live, idle)
	}
}
