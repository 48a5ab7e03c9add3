package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/server"
	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/tenant"
)

const adminKey = "admin-0123456789abcdef0123456789abcdef"

// tenantServer is a multi-tenant server of two tenants, a and b, each with the agents
// echo (kept in one store both share) and gate; a may run one turn at a time, b one
// turn a minute.
type tenantServer struct {
	*httptest.Server
	srv      *server.Server
	keys     *tenant.Keys
	gates    map[string]*gate
	key      map[string]string // a key of each tenant
	limiters map[string]*tenant.Limiter
	log      *syncBuffer
}

// syncBuffer is a buffer the server's log goes to, safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newTenantServer(t testing.TB) *tenantServer {
	return newTenantServerOf(t, `
tenants:
  - id: a
    quotas: {concurrentTurns: 1}
  - id: b
    quotas: {turnsPerMinute: 1}
`)
}

// workModel is a model that works: each answer costs about the CPU time of hashing a
// megabyte, as a model or plugin running in-process would, and 100 tokens.
func workModel(ctx context.Context, req *abi.GenerateRequest, _ agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
	sum := sha256.Sum256([]byte(req.Messages[len(req.Messages)-1].Text()))
	for range 1 << 15 {
		sum = sha256.Sum256(sum[:])
	}
	return &abi.GenerateResponse{Message: abi.NewModelTextMessage(hex.EncodeToString(sum[:4])), FinishReason: abi.FinishStop,
		Usage: &abi.GenerationUsage{InputTokens: 60, OutputTokens: 40}}, nil
}

// newTenantServerOf serves the tenants of a tenants file, each with the agents echo
// (kept in one store they all share), gate and work (test/work, kept in memory).
func newTenantServerOf(t testing.TB, tenantsFile string) *tenantServer {
	t.Helper()
	ts, err := tenant.Parse([]byte(tenantsFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"echo.yaml": "name: echo\nmodel: {name: test/echo}\ntools: [askUser, note]\n",
		"gate.yaml": "name: gate\nmodel: {name: test/gate}\ntools: [upper]\nsnapshots: {store: memory}\n",
		"work.yaml": "name: work\nmodel: {name: test/work}\nsnapshots: {store: memory}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := deploy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := host.New(agent.NewRegistry(), host.WithLogger(quietLog))
	if err != nil {
		t.Fatal(err)
	}
	shared := store.NewMemory()
	keys, err := tenant.OpenKeys(filepath.Join(dir, "keys.json"), ts)
	if err != nil {
		t.Fatal(err)
	}
	out := &tenantServer{keys: keys, gates: map[string]*gate{}, key: map[string]string{}, limiters: map[string]*tenant.Limiter{},
		log: &syncBuffer{}}
	var tenants []server.Tenant
	for _, tn := range ts {
		g := &gate{started: make(chan struct{}), release: make(chan struct{})}
		limiter := tenant.NewLimiter(tn)
		reg := testRegistry(g)
		agent.DefineModel(reg, "test/work", nil, workModel)
		d, err := deploy.New(t.Context(), files, deploy.WithRegistry(reg), deploy.WithStore(shared),
			deploy.WithLogger(quietLog), deploy.WithUsage(limiter.CountUsage), deploy.WithTenant(root, tn.ID, host.TenantConfig{Admit: tn.Admission(), Gate: limiter}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		tenants = append(tenants, server.Tenant{ID: tn.ID, Deployment: d, Limiter: limiter})
		out.gates[tn.ID] = g
		out.limiters[tn.ID] = limiter
		if out.key[tn.ID], _, err = keys.Create(tn.ID); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := tenant.NewAdminKey(adminKey)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(nil, server.WithLogger(slog.New(slog.NewTextHandler(out.log, nil))),
		server.WithTenants(keys, admin, tenants...))
	if err != nil {
		t.Fatal(err)
	}
	out.srv = srv
	out.Server = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		out.Close()
		srv.Shutdown(context.Background())
		root.Close(context.Background())
	})
	return out
}

// call sends a request with key (none if "") and a JSON body, decodes the answer into
// out when given, and returns the response.
func (ts *tenantServer) call(t testing.TB, key, method, path string, body, out any) *http.Response {
	t.Helper()
	return request(t, ts.Server, key, method, path, body, out)
}

// A key of tenant b cannot read, resume, list, answer, cancel, close or abort tenant
// a's sessions and snapshots: each is not found, as if it did not exist, and logged.
func TestTenantCannotReachAnotherTenantsSessions(t *testing.T) {
	ts := newTenantServer(t)
	a, b := ts.key["a"], ts.key["b"]
	var info server.SessionInfo
	if resp := ts.call(t, a, "POST", "/api/agents/echo/sessions", nil, &info); resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a's session: %d", resp.StatusCode)
	}
	id := info.SessionID
	turn := map[string]any{"text": "ask a secret question?"}
	if resp := ts.call(t, a, "POST", "/api/agents/echo/sessions/"+id+"/turns", turn, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a's turn: %d", resp.StatusCode)
	}
	ts.call(t, a, "GET", "/api/agents/echo/sessions/"+id, nil, &info)
	if info.Snapshot == nil {
		t.Fatal("a's session has no snapshot")
	}
	snap := info.Snapshot.SnapshotID
	answer := map[string]any{"resume": map[string]any{"respond": []any{
		map[string]any{"toolResponse": map[string]any{"name": "askUser", "ref": "q1", "output": "b's answer"}}}}}

	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/agents/echo/sessions/" + id, nil},
		{"POST", "/api/agents/echo/sessions/" + id + "/turns", map[string]any{"text": "hi"}},
		{"POST", "/api/agents/echo/sessions/" + id + "/turns", answer},
		{"POST", "/api/agents/echo/sessions/" + id + "/cancel", nil},
		{"GET", "/api/agents/echo/sessions/" + id + "/snapshots", nil},
		{"GET", "/api/agents/echo/snapshots/" + snap, nil},
		{"DELETE", "/api/agents/echo/sessions/" + id, nil},
	} {
		if resp := ts.call(t, b, c.method, c.path, c.body, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("b: %s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
	// Abort answers an unknown snapshot with no status, as Genkit's: a's is unknown to b.
	var aborted map[string]any
	if resp := ts.call(t, b, "POST", "/api/agents/echo/snapshots/"+snap+"/abort", nil, &aborted); resp.StatusCode != http.StatusOK || aborted["status"] != nil {
		t.Errorf("b aborting a's snapshot: %d %v, want 200 and no status", resp.StatusCode, aborted)
	}
	// Resuming a's session from its snapshot, as a new session of b's, finds nothing.
	if resp := ts.call(t, b, "POST", "/api/agents/echo/sessions", map[string]any{"snapshotId": snap}, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("b resuming a's snapshot: %d, want 404", resp.StatusCode)
	}
	var list struct{ Sessions []server.SessionInfo }
	ts.call(t, b, "GET", "/api/agents/echo/sessions", nil, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("b lists %+v", list.Sessions)
	}
	if !strings.Contains(ts.log.String(), "request denied") || !strings.Contains(ts.log.String(), "tenant=b") {
		t.Errorf("the denials were not logged:\n%s", ts.log)
	}

	// a's session is untouched: still interrupted, answered by a.
	if resp := ts.call(t, a, "POST", "/api/agents/echo/sessions/"+id+"/turns", answer, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a answering its own interrupt: %d", resp.StatusCode)
	}
	ts.call(t, a, "GET", "/api/agents/echo/sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != id {
		t.Errorf("a lists %+v", list.Sessions)
	}
}

// Without a valid key nothing but the health checks answers; a key narrowed to some
// agents finds no other.
func TestTenantKeysAreRequiredAndScoped(t *testing.T) {
	ts := newTenantServer(t)
	for _, key := range []string{"", "nonsense", ts.key["a"] + "x", adminKey} {
		for _, path := range []string{"/api/agents", "/v1/models", "/api/agents/echo/connect"} {
			if resp := ts.call(t, key, "GET", path, nil, nil); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("key %q: GET %s: %d, want 401", key, path, resp.StatusCode)
			}
		}
	}
	if resp := ts.call(t, "", "GET", "/healthz", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz without a key: %d", resp.StatusCode)
	}
	// OpenAI's clients read OpenAI's error.
	var e openAIError
	if resp := ts.call(t, "nonsense", "POST", "/v1/chat/completions", map[string]any{}, &e); resp.StatusCode != http.StatusUnauthorized ||
		e.Error.Code != "invalid_api_key" || e.Error.Type != "invalid_request_error" {
		t.Errorf("a bad key on /v1: %d %+v", resp.StatusCode, e)
	}

	var made server.NewKey
	if resp := ts.call(t, adminKey, "POST", "/admin/tenants/a/keys", server.KeyRequest{Agents: []string{"gate"}}, &made); resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a key: %d", resp.StatusCode)
	}
	var agents struct{ Agents []server.AgentInfo }
	ts.call(t, made.Key, "GET", "/api/agents", nil, &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Name != "gate" {
		t.Errorf("a key narrowed to gate lists %+v", agents.Agents)
	}
	if resp := ts.call(t, made.Key, "GET", "/api/agents/echo", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a key narrowed to gate reads echo: %d", resp.StatusCode)
	}
	chat := map[string]any{"model": "echo", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	if resp := ts.call(t, made.Key, "POST", "/v1/chat/completions", chat, &e); resp.StatusCode != http.StatusNotFound || e.Error.Code != "model_not_found" {
		t.Errorf("a key narrowed to gate chats with echo: %d %+v", resp.StatusCode, e)
	}
	var models struct{ Data []struct{ ID string } }
	ts.call(t, made.Key, "GET", "/v1/models", nil, &models)
	if len(models.Data) != 1 || models.Data[0].ID != "gate" {
		t.Errorf("a key narrowed to gate lists the models %+v", models.Data)
	}
	ts.call(t, ts.key["a"], "GET", "/v1/models", nil, &models)
	if len(models.Data) != 3 {
		t.Errorf("a's key lists the models %+v, want its three agents", models.Data)
	}
	if resp := ts.call(t, ts.key["a"], "POST", "/v1/chat/completions", chat, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a's key chats with echo: %d", resp.StatusCode)
	}
}

// A revoked key fails at once; the admin API needs the admin key.
func TestRevokedKeyFailsAtOnce(t *testing.T) {
	ts := newTenantServer(t)
	for _, key := range []string{"", ts.key["a"]} {
		if resp := ts.call(t, key, "POST", "/admin/tenants/a/keys", nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("creating a key with key %q: %d, want 401", key, resp.StatusCode)
		}
	}
	if resp := ts.call(t, adminKey, "POST", "/admin/tenants/nobody/keys", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a key of an unknown tenant: %d, want 404", resp.StatusCode)
	}
	var made server.NewKey
	ts.call(t, adminKey, "POST", "/admin/tenants/b/keys", nil, &made)
	if resp := ts.call(t, made.Key, "GET", "/api/agents", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a new key: %d", resp.StatusCode)
	}
	if resp := ts.call(t, adminKey, "DELETE", "/admin/keys/"+made.ID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoking: %d", resp.StatusCode)
	}
	if resp := ts.call(t, made.Key, "GET", "/api/agents", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", resp.StatusCode)
	}
	var list struct{ Keys []server.KeyInfo }
	ts.call(t, adminKey, "GET", "/admin/tenants/b/keys", nil, &list)
	if len(list.Keys) != 2 || list.Keys[1].ID != made.ID || list.Keys[1].Revoked == nil {
		t.Errorf("b's keys: %+v", list.Keys)
	}
}

// A quota refuses a turn with 429 and Retry-After, and the tenant's turns run again
// once it has room; another tenant's turns are not refused meanwhile.
func TestTenantQuotas(t *testing.T) {
	ts := newTenantServer(t)
	a, b := ts.key["a"], ts.key["b"]
	other := ts.newSessionOf(t, a, "echo")
	release := ts.holdTurn(t, "a")
	var e struct{ Code, Message string }
	resp := ts.call(t, a, "POST", "/api/agents/echo/sessions/"+other+"/turns", map[string]any{"text": "hi"}, &e)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || e.Code != "over_quota" ||
		!strings.Contains(e.Message, "concurrentTurns") {
		t.Errorf("a's second turn at once: %d, Retry-After %q, %+v", resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	// b is not refused while a is at its quota.
	bs := ts.newSessionOf(t, b, "echo")
	if resp := ts.call(t, b, "POST", "/api/agents/echo/sessions/"+bs+"/turns", map[string]any{"text": "hi"}, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("b's turn while a is at its quota: %d", resp.StatusCode)
	}
	release()
	if resp := ts.call(t, a, "POST", "/api/agents/echo/sessions/"+other+"/turns", map[string]any{"text": "hi"}, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a's turn once its first ended: %d", resp.StatusCode)
	}

	// b may start one turn a minute: its second is refused until the minute is over.
	var oe openAIError
	resp = ts.call(t, b, "POST", "/v1/chat/completions", map[string]any{"model": "echo",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, &oe)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != fmt.Sprint(60) ||
		oe.Error.Type != "requests" || oe.Error.Code != "rate_limit_exceeded" {
		t.Errorf("b's second turn in a minute: %d, Retry-After %q, %+v", resp.StatusCode, resp.Header.Get("Retry-After"), oe)
	}
}

// A WebSocket needs a key too, and opens its tenant's sessions only.
func TestTenantWebSocket(t *testing.T) {
	ts := newTenantServer(t)
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/agents/echo/connect"
	dial := func(key, query string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(t.Context(), url+query, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	}
	if _, resp, err := websocket.Dial(t.Context(), url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: %v, %v", resp, err)
	}
	c, _, err := dial(ts.key["a"], "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	w := &wsClient{c: c}
	m := w.next(t)
	if m.Type != "session" {
		t.Fatalf("first message %+v", m)
	}
	if got := w.turn(t, "hello"); got != "echo: hello" {
		t.Errorf("a's turn: %q", got)
	}
	// b naming a's session ID opens a session of its own, as any ID b never used
	// does: nothing of a's is in it, and a's is untouched.
	bc, _, err := dial(ts.key["b"], "?sessionId="+m.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.CloseNow()
	bw := &wsClient{c: bc}
	bw.next(t)
	bw.turn(t, "b was here")
	for key, want := range map[string]string{"a": "hello", "b": "b was here"} {
		var info server.SessionInfo
		ts.call(t, ts.key[key], "GET", "/api/agents/echo/sessions/"+m.SessionID, nil, &info)
		if info.Snapshot == nil || len(info.Snapshot.State.Messages) != 2 || info.Snapshot.State.Messages[0].Text() != want {
			t.Errorf("%s's session: %+v", key, info.Snapshot)
		}
	}
}

// A tenant at its concurrentSessions quota opens no more sessions (429), until one
// of its sessions closes; another tenant opens sessions meanwhile.
func TestTenantSessionQuota(t *testing.T) {
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {concurrentSessions: 1}\n  - id: b\n")
	a := ts.key["a"]
	var info server.SessionInfo
	if resp := ts.call(t, a, "POST", "/api/agents/echo/sessions", nil, &info); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a's first session: %d", resp.StatusCode)
	}
	var e struct{ Code, Message string }
	resp := ts.call(t, a, "POST", "/api/agents/gate/sessions", nil, &e)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(e.Message, "concurrentSessions") {
		t.Errorf("a's second session: %d, Retry-After %q, %+v", resp.StatusCode, resp.Header.Get("Retry-After"), e)
	}
	if resp := ts.call(t, ts.key["b"], "POST", "/api/agents/echo/sessions", nil, nil); resp.StatusCode != http.StatusCreated {
		t.Errorf("b's session while a is at its quota: %d", resp.StatusCode)
	}
	if resp := ts.call(t, a, "DELETE", "/api/agents/echo/sessions/"+info.SessionID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("closing a's session: %d", resp.StatusCode)
	}
	if resp := ts.call(t, a, "POST", "/api/agents/gate/sessions", nil, nil); resp.StatusCode != http.StatusCreated {
		t.Errorf("a's session once its first closed: %d", resp.StatusCode)
	}
	// The closed session is kept, and reopens on its next turn only within the quota.
	resp = ts.call(t, a, "POST", "/api/agents/echo/sessions/"+info.SessionID+"/turns", map[string]any{"text": "hi"}, nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("reopening a kept session beyond the quota: %d", resp.StatusCode)
	}
}

// wsURL is the WebSocket URL of the agent echo's connect route.
func (ts *tenantServer) wsURL() string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/agents/echo/connect"
}

// A browser cannot set headers on a WebSocket: it offers its key as the subprotocol
// bearer.<key>, beside terrarium.v1, the one the server echoes (never the key). Another
// tenant's key so offered finds a's snapshot no more than over HTTP.
func TestTenantWebSocketKeyAsSubprotocol(t *testing.T) {
	ts := newTenantServer(t)
	dial := func(key, query string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(t.Context(), ts.wsURL()+query, &websocket.DialOptions{Subprotocols: []string{"terrarium.v1", "bearer." + key}})
	}
	c, resp, err := dial(ts.key["a"], "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "terrarium.v1" || c.Subprotocol() != "terrarium.v1" {
		t.Errorf("the server answered the subprotocols %q, want terrarium.v1 alone", got)
	}
	w := &wsClient{c: c}
	m := w.next(t)
	if got := w.turn(t, "hello"); got != "echo: hello" {
		t.Errorf("a's turn: %q", got)
	}
	var info server.SessionInfo
	ts.call(t, ts.key["a"], "GET", "/api/agents/echo/sessions/"+m.SessionID, nil, &info)
	if info.Snapshot == nil {
		t.Fatal("a's session has no snapshot")
	}
	snap := info.Snapshot.SnapshotID

	var overHTTP, overWS abi.Error
	if resp := ts.call(t, ts.key["b"], "GET", "/api/agents/echo/snapshots/"+snap, nil, &overHTTP); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("b reading a's snapshot over HTTP: %d", resp.StatusCode)
	}
	_, resp, err = dial(ts.key["b"], "?snapshotId="+snap)
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("b resuming a's snapshot over a WebSocket: %v, %v", resp, err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&overWS); err != nil || overWS.Code != overHTTP.Code {
		t.Errorf("over a WebSocket b is told %+v (%v), over HTTP %+v", overWS, err, overHTTP)
	}
	if _, resp, err := dial(ts.key["a"]+"x", ""); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong key as a subprotocol: %v, %v", resp, err)
	}
}

// A key is taken from the Authorization header, or a WebSocket handshake's
// subprotocols, and nowhere else: a key in the URL would land in access logs and
// browser histories, so it is refused, as is the subprotocol on a plain request.
func TestTenantKeyElsewhereIsRefused(t *testing.T) {
	ts := newTenantServer(t)
	key := ts.key["a"]
	for _, q := range []string{"access_token", "key", "apiKey", "token", "authorization", "bearer"} {
		query := "?" + q + "=" + key
		if resp := ts.call(t, "", "GET", "/api/agents"+query, nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/agents%s: %d, want 401", query, resp.StatusCode)
		}
		if _, resp, err := websocket.Dial(t.Context(), ts.wsURL()+query, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a WebSocket with %s: %v, %v", query, resp, err)
		}
	}
	// The subprotocol is read on a WebSocket handshake of the WebSocket route only:
	// not on a plain request, nor one that says Upgrade on another route, nor one
	// that says it on the WebSocket route without being a handshake.
	for _, tc := range []struct {
		path    string
		upgrade bool
	}{{"/api/agents", false}, {"/api/agents", true}, {"/api/agents/echo/sessions", true}, {"/api/agents/echo/connect", true}} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Sec-WebSocket-Protocol", "terrarium.v1, bearer."+key)
		if tc.upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a subprotocol key on GET %s (Upgrade: %v): %d, want 401", tc.path, tc.upgrade, resp.StatusCode)
		}
	}
}

// A WebSocket opened with a key later revoked runs no more turns: the next message
// is answered unauthenticated, and the socket closed.
func TestTenantWebSocketOfARevokedKey(t *testing.T) {
	ts := newTenantServer(t)
	secret, key, err := ts.keys.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := websocket.Dial(t.Context(), ts.wsURL(), &websocket.DialOptions{Subprotocols: []string{"terrarium.v1", "bearer." + secret}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	w := &wsClient{c: c}
	w.next(t)
	if got := w.turn(t, "before"); got != "echo: before" {
		t.Fatalf("a turn before the revocation: %q", got)
	}
	if resp := ts.call(t, adminKey, "DELETE", "/admin/keys/"+key.ID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoking the key: %d", resp.StatusCode)
	}
	w.send(t, map[string]any{"text": "after"})
	if m := w.next(t); m.Type != "error" || m.Error.Code != "unauthenticated" {
		t.Errorf("a turn after the revocation: %+v", m)
	}
	if _, _, err := c.Read(t.Context()); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("the socket after the revocation: %v, want it closed", err)
	}
}

// A tenant's WebSockets are bounded by its quota (webSockets): one more is refused
// with 429.
func TestTenantWebSocketsQuota(t *testing.T) {
	ts := newTenantServerOf(t, "tenants:\n  - id: a\n    quotas: {webSockets: 1}\n")
	dial := func() (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(t.Context(), ts.wsURL(), &websocket.DialOptions{Subprotocols: []string{"terrarium.v1", "bearer." + ts.key["a"]}})
	}
	c, _, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, resp, err := dial()
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second WebSocket past the quota: %v, %v, want 429", resp, err)
	}
	var e abi.Error
	if json.NewDecoder(resp.Body).Decode(&e); e.Code != "over_quota" || !strings.Contains(e.Message, "webSockets") {
		t.Errorf("the refusal: %+v", e)
	}
}

// /readyz of a multi-tenant server checks every tenant's deployment.
func TestTenantReadyz(t *testing.T) {
	ts := newTenantServer(t)
	var body map[string]string
	if resp := ts.call(t, "", "GET", "/readyz", nil, &body); resp.StatusCode != http.StatusOK || body["status"] != "ready" {
		t.Errorf("/readyz: %d %v", resp.StatusCode, body)
	}
}
