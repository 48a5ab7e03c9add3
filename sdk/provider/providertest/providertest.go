// Package providertest is the shared test harness of the plugins serving a remote model
// API (plugins/openai, plugins/anthropic, plugins/gemini), as package storetest is for
// stores. A provider's tests describe the plugin (Provider) and write its API's wire
// format once (Codec); the harness gives them
//
//   - a fake model (Reply): deterministic, rule-based answers to any reasonable request,
//     served in the provider's wire format by a loopback server (FakeServer) that also
//     fails, streams an error or hangs on demand and pauses a stream on a handshake;
//   - the cases every provider must pass (Run), through a host with the plugin built to
//     WebAssembly: what it declares, the fake model's rules end to end, chunks
//     forwarded as they arrive, HTTP errors, retries and backups, timeouts, a missing
//     key, an unreachable server, tool content parts, and the conformance suite;
//   - helpers for a provider's own tests of its wire format: Load, Script (a server
//     replaying scripted answers, checking each request with the Codec), replies and
//     JSON comparisons.
package providertest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// TestKey is the API key the manifests of Load grant.
const TestKey = "test-key-123"

// Provider describes a provider plugin under test.
type Provider struct {
	// Name is the plugin's name, the first segment of its models' names ("openai").
	Name string
	// Dir is the directory of the plugin's main package, built with pluginbuild ("."
	// from the plugin's own tests).
	Dir string
	// BasePath is appended to a test server's URL to make the config baseURL ("/v1").
	BasePath string
	// KeySecret is the secret the plugin asks for by default, KeyHeader the header it
	// sends it in.
	KeySecret, KeyHeader string
	// DefaultModels are the models the plugin declares without config, DefaultHost the
	// host of its default base URL.
	DefaultModels []string
	DefaultHost   string
	// Supports is what every model of the plugin claims.
	Supports abi.ModelSupports
	// Reasoning is a request config asking a model to show its reasoning.
	Reasoning map[string]any
	// Codec is the API's wire format.
	Codec Codec
	// ToolContent checks the body of the request that answers a tool returning the
	// output "drawn" with the content parts text "A red square." and the image
	// TinyPNG: the wire form the API gives a tool's content. Nil checks nothing more
	// than the decoded request.
	ToolContent func(t *testing.T, body map[string]any)
}

// TinyPNG is a 1x1 PNG as a data: URL.
const TinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

var (
	wasmMu    sync.Mutex
	wasmBytes = map[string][]byte{}
)

// Wasm returns the plugin's module, built once per test binary.
func (p *Provider) Wasm(t testing.TB) []byte {
	t.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	if b, ok := wasmBytes[p.Dir]; ok {
		return b
	}
	b, err := os.ReadFile(pluginbuild.ForTest(t, p.Dir))
	if err != nil {
		t.Fatal(err)
	}
	wasmBytes[p.Dir] = b
	return b
}

// Manifest grants the plugin the host of serverURL, its config (baseURL is serverURL
// and BasePath unless config sets it) and the key TestKey as KeySecret, bound to
// KeyHeader.
func (p *Provider) Manifest(serverURL string, config map[string]string) host.Manifest {
	cfg := map[string]string{"baseURL": serverURL + p.BasePath}
	maps.Copy(cfg, config)
	return host.Manifest{
		HTTP:    []string{provider.Host(serverURL)},
		Config:  cfg,
		Secrets: map[string]host.Secret{p.KeySecret: {Value: TestKey, Header: p.KeyHeader}},
	}
}

// Load loads the plugin into a fresh host, closed when the test ends, with the
// Manifest for serverURL and config changed by edit, and returns the registry serving
// its models.
func (p *Provider) Load(t testing.TB, serverURL string, config map[string]string, edit ...func(*host.Manifest)) (*agent.Registry, *host.Plugin) {
	t.Helper()
	r := agent.NewRegistry()
	h, err := host.New(r, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	m := p.Manifest(serverURL, config)
	for _, e := range edit {
		e(&m)
	}
	pl, err := h.Load(t.Context(), p.Wasm(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return r, pl
}

// Model returns the option naming one of the plugin's models.
func (p *Provider) Model(name string) agent.GenerateOption {
	return agent.WithModelName(p.Name + "/" + name)
}

// Exchange is one request a Script expects and its answer.
type Exchange struct {
	// Check inspects the request and its decoded JSON body (nil: no more checks than
	// the Codec's).
	Check func(t *testing.T, r *http.Request, body map[string]any)
	Reply func(w http.ResponseWriter)
}

// Script starts a server, closed when the test ends, that plays exchanges in order:
// each request must carry TestKey in the key header and pass the Codec's Decode, then
// its exchange's Check; every exchange must be played by the end of the test.
func (p *Provider) Script(t *testing.T, exchanges ...Exchange) *httptest.Server {
	var mu sync.Mutex
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(exchanges) {
			t.Errorf("unexpected request %d: %s %s", i+1, r.Method, r.URL)
			http.Error(w, "no more exchanges", http.StatusInternalServerError)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		if key := r.Header.Get(p.KeyHeader); !strings.Contains(key, TestKey) {
			t.Errorf("request %d: %s = %q, want the key %s", i+1, p.KeyHeader, key, TestKey)
		}
		if _, err := p.Codec.Decode(r, raw); err != nil {
			t.Errorf("request %d: the API would refuse it: %v", i+1, err)
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request %d: body: %v", i+1, err)
		}
		if ex := exchanges[i]; ex.Check != nil {
			ex.Check(t, r, body)
		}
		exchanges[i].Reply(w)
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		if next != len(exchanges) {
			t.Errorf("the server got %d requests, want %d", next, len(exchanges))
		}
	})
	return srv
}

// ReplyJSON answers with a status, headers (name, value pairs) and a JSON body.
func ReplyJSON(status int, body string, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// ReplyEvents answers with a stream of server-sent events, each written as it is
// (framing included) and flushed.
func ReplyEvents(events ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

// Field reads a value in decoded JSON by a path of keys (strings) and indexes (ints);
// nil when the path leads nowhere.
func Field(v any, path ...any) any {
	for _, step := range path {
		switch k := step.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// JSON is v encoded, for messages and comparisons.
func JSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// JSONEq checks that v encodes to the JSON want, keys in any order.
func JSONEq(t *testing.T, what string, v any, want string) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	json.Unmarshal([]byte(JSON(v)), &g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s =\n%s\nwant\n%s", what, JSON(g), JSON(w))
	}
}
