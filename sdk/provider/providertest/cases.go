package providertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/conformance"
	"github.com/terrarium-ai/terrarium/host/conformance/conformancetest"
	"github.com/terrarium-ai/terrarium/sdk/provider"
)

// errorStatuses are the HTTP errors every provider must map (529 is Anthropic's
// "overloaded").
var errorStatuses = []int{400, 401, 403, 404, 429, 500, 503, 529}

// Run runs the cases every provider plugin must pass, as subtests, against the fake
// server (FakeServer) and through a host with the plugin loaded.
func Run(t *testing.T, p *Provider) {
	srv := p.FakeServer(t)
	models := []string{"fake-model", "backup", "hang", "midstream-503"}
	for _, s := range errorStatuses {
		models = append(models, fmt.Sprintf("http-%d", s))
	}
	r, _ := p.Load(t, srv.URL, map[string]string{"models": strings.Join(models, ",")})
	c := &cases{p: p, srv: srv, r: r}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Describe", c.describe},
		{"FakeModel", c.fakeModel},
		{"StreamsAsItArrives", c.streamsAsItArrives},
		{"HTTPErrors", c.httpErrors},
		{"ErrorMidStream", c.errorMidStream},
		{"RetryThenBackup", c.retryThenBackup},
		{"TimeoutThenBackup", c.timeoutThenBackup},
		{"NoAPIKey", c.noAPIKey},
		{"Unreachable", c.unreachable},
		{"ToolContent", c.toolContent},
		{"Conformance", c.conformance},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// cases holds what the cases share: the fake server and a host serving the plugin's
// models on it.
type cases struct {
	p   *Provider
	srv *Server
	r   *agent.Registry
}

// generate calls the model with the plugin's name before it, failing the test on an
// error.
func (c *cases) generate(t *testing.T, model string, opts ...agent.GenerateOption) *abi.GenerateResponse {
	t.Helper()
	resp, err := agent.Generate(t.Context(), c.r, append([]agent.GenerateOption{c.p.Model(model)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// stream calls the model streaming, and returns the chunks and the final response.
func (c *cases) stream(t *testing.T, model string, opts ...agent.GenerateOption) ([]*abi.GenerateResponseChunk, *abi.GenerateResponse) {
	t.Helper()
	var chunks []*abi.GenerateResponseChunk
	for v, err := range agent.GenerateStream(t.Context(), c.r, append([]agent.GenerateOption{c.p.Model(model)}, opts...)...) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Done {
			return chunks, v.Response
		}
		chunks = append(chunks, v.Chunk)
	}
	t.Fatal("the stream ended without a final response")
	return nil, nil
}

// describe: the models the config names, the capabilities the plugin asks for, the
// defaults without config, and the secret the config names.
func (c *cases) describe(t *testing.T) {
	p := c.p
	r, pl := p.Load(t, c.srv.URL, map[string]string{"models": " model-a, vendor/model-b:free ,model-c"})
	want := []string{"/model/" + p.Name + "/model-a", "/model/" + p.Name + "/model-c", "/model/" + p.Name + "/vendor/model-b:free"}
	if got := slices.Sorted(slices.Values(pl.Keys())); !slices.Equal(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
	JSONEq(t, "capabilities", pl.Descriptor().Capabilities,
		`{"http":["`+provider.Host(c.srv.URL)+`"],"config":["baseURL","models","apiKeySecret"],"secrets":["`+p.KeySecret+`"]}`)
	m, err := r.LookupModel(p.Name + "/vendor/model-b:free")
	if err != nil {
		t.Fatal(err)
	}
	JSONEq(t, "supports", m.Info().Supports, JSON(p.Supports))

	// Without config the defaults are declared, and the default host is asked for and
	// used, which this manifest does not grant.
	r, pl = p.Load(t, c.srv.URL, nil, func(m *host.Manifest) { m.Config, m.HTTP = nil, []string{"127.0.0.1"} })
	want = nil
	for _, name := range p.DefaultModels {
		want = append(want, "/model/"+p.Name+"/"+name)
	}
	if got := slices.Sorted(slices.Values(pl.Keys())); !slices.Equal(got, slices.Sorted(slices.Values(want))) ||
		!slices.Equal(pl.Descriptor().Capabilities.HTTP, []string{p.DefaultHost}) {
		t.Errorf("default keys = %v, descriptor = %+v", got, pl.Descriptor())
	}
	_, err = agent.Generate(t.Context(), r, p.Model(p.DefaultModels[0]), agent.WithPrompt("hi"))
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodePermissionDenied || !strings.Contains(ae.Message, p.DefaultHost) {
		t.Errorf("host not granted: %v", err)
	}

	// The secret the config names is asked for and sent.
	r, pl = p.Load(t, c.srv.URL, map[string]string{"models": "fake-model", "apiKeySecret": "TEAM_KEY"}, func(m *host.Manifest) {
		m.Secrets = map[string]host.Secret{"TEAM_KEY": {Value: TestKey, Header: p.KeyHeader}}
	})
	if s := pl.Descriptor().Capabilities.Secrets; !slices.Equal(s, []string{"TEAM_KEY"}) {
		t.Errorf("secrets = %v, want TEAM_KEY", s)
	}
	if text, err := agent.GenerateText(t.Context(), r, p.Model("fake-model"), agent.WithPrompt("hi")); err != nil || text != "echo: hi" {
		t.Errorf("with the key of apiKeySecret: %q, %v", text, err)
	}
}

type addInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

// addTool is a native tool named math/add (which APIs want sanitized) recording its
// inputs.
func addTool(inputs *[]addInput) agent.Tool {
	var mu sync.Mutex
	return agent.NewTool("math/add", "Adds two integers.", func(ctx context.Context, in addInput) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		*inputs = append(*inputs, in)
		return in.A + in.B, nil
	})
}

type forecast struct {
	City  string  `json:"city"`
	TempC float64 `json:"tempC"`
}

// fakeModel drives the plugin through each rule of the fake model (Reply), streamed
// and not.
func (c *cases) fakeModel(t *testing.T) {
	const model = "fake-model"
	// Echo, with usage; the same request gets the same answer.
	resp := c.generate(t, model, agent.WithSystem("Be nice."), agent.WithPrompt("Hello there friend"))
	if resp.Text() != "echo: Hello there friend" || resp.FinishReason != abi.FinishStop || resp.Usage == nil || resp.Usage.InputTokens != 5 || resp.Usage.OutputTokens != 4 {
		t.Errorf("echo = %s", JSON(resp))
	}
	again := c.generate(t, model, agent.WithSystem("Be nice."), agent.WithPrompt("Hello there friend"))
	if resp.Custom == nil || JSON(again.Custom) != JSON(resp.Custom) {
		t.Errorf("not deterministic: %s then %s", JSON(resp.Custom), JSON(again.Custom))
	}
	chunks, final := c.stream(t, model, agent.WithPrompt("Count from one to five."))
	var texts []string
	for _, ch := range chunks {
		texts = append(texts, ch.Text())
	}
	if want := Words("echo: Count from one to five."); !slices.Equal(texts, want) || final.Text() != "echo: Count from one to five." ||
		final.Usage == nil || final.Usage.TotalTokens != 11 {
		t.Errorf("streamed echo: chunks %q, want %q; final %s", texts, want, JSON(final))
	}

	// Images, reasoning, the token limit, stop sequences.
	resp = c.generate(t, model, agent.WithMessages(abi.NewUserMessage(abi.NewTextPart("What color?"), abi.NewMediaPart("image/png", TinyPNG))))
	if resp.Text() != "echo: What color? [1 image]" {
		t.Errorf("image: %q", resp.Text())
	}
	limited := map[string]any{"maxOutputTokens": 1}
	maps.Copy(limited, c.p.Reasoning)
	resp = c.generate(t, model, agent.WithPrompt("Why?"), agent.WithConfig(limited))
	if resp.Reasoning() != "Thinking about: Why?" || resp.Text() != "echo:" || resp.FinishReason != abi.FinishLength {
		t.Errorf("reasoning and limit: %s", JSON(resp))
	}
	chunks, final = c.stream(t, model, agent.WithPrompt("Why?"), agent.WithConfig(c.p.Reasoning))
	if !slices.ContainsFunc(chunks, func(ch *abi.GenerateResponseChunk) bool { return ch.Reasoning() != "" }) ||
		final.Reasoning() != "Thinking about: Why?" || final.Text() != "echo: Why?" {
		t.Errorf("streamed reasoning: %s", JSON(final))
	}
	resp = c.generate(t, model, agent.WithPrompt("stop HERE please"), agent.WithConfig(map[string]any{"stopSequences": []string{"HERE"}}))
	if resp.Text() != "echo: stop " || resp.FinishReason != abi.FinishStop {
		t.Errorf("stop sequence: %s", JSON(resp))
	}

	// Tools: "use <tool>" with the tool's own name, then the follow-up.
	var inputs []addInput
	resp = c.generate(t, model, agent.WithPrompt("Please use math/add now."), agent.WithTools(addTool(&inputs)))
	trs := resp.Request.Messages[1].ToolRequests()
	if !strings.HasPrefix(resp.Text(), "Tool results: ") || !strings.Contains(resp.Text(), "2") || !slices.Equal(inputs, []addInput{{1, 1}}) ||
		len(trs) != 1 || trs[0].Name != "math/add" || trs[0].Ref == "" {
		t.Errorf("tool flow: %s, inputs %v", JSON(resp), inputs)
	}
	chunks, final = c.stream(t, model, agent.WithPrompt(`/call math/add {"a": 20, "b": 22}`), agent.WithTools(addTool(&inputs)))
	whole := slices.ContainsFunc(chunks, func(ch *abi.GenerateResponseChunk) bool {
		trs := (&abi.Message{Content: ch.Content}).ToolRequests()
		return len(trs) == 1 && !trs[0].Partial && trs[0].Name == "math/add" && JSON(trs[0].Input) == `{"a":20,"b":22}`
	})
	if !whole || !strings.Contains(final.Text(), "42") || len(inputs) != 2 || inputs[1] != (addInput{20, 22}) {
		t.Errorf("streamed tool flow: whole request streamed %v, final %s, inputs %v", whole, JSON(final), inputs)
	}
	resp = c.generate(t, model, agent.WithPrompt("What is the weather?"), agent.WithTools(addTool(&inputs)),
		agent.WithToolChoice(abi.ToolChoiceRequired), agent.WithReturnToolRequests(true))
	if trs := resp.ToolRequests(); len(trs) != 1 || trs[0].Name != "math/add" || JSON(trs[0].Input) != `{"a":1,"b":1}` {
		t.Errorf("required tool: %s", JSON(resp.Message))
	}
	resp = c.generate(t, model, agent.WithPrompt("use math/add"), agent.WithTools(addTool(&inputs)), agent.WithToolChoice(abi.ToolChoiceNone))
	if resp.Text() != "echo: use math/add" {
		t.Errorf("tool choice none: %q", resp.Text())
	}

	// JSON: a minimal instance of the schema, constrained natively (when the plugin
	// can) or through format instructions.
	for _, constrained := range []bool{true, false} {
		if constrained && (c.p.Supports.Constrained == "" || c.p.Supports.Constrained == abi.ConstrainedNone) {
			continue
		}
		out, resp, err := agent.GenerateData[forecast](t.Context(), c.r, c.p.Model(model), agent.WithPrompt("Weather?"), agent.WithConstrained(constrained))
		if err != nil || *out != (forecast{"a", 1.5}) || resp.Request.Output.Constrained != constrained {
			t.Errorf("json (constrained %v): %+v, %v", constrained, out, err)
		}
	}
}

// streamsAsItArrives: the server holds the stream after its first piece of text until
// the caller has that piece, so a plugin that waited for more before forwarding it
// would never get the rest (the call fails when the manifest's timeout ends it).
func (c *cases) streamsAsItArrives(t *testing.T) {
	const prompt = "Stream this to me as it comes."
	release := c.srv.Hold(prompt)
	defer release()
	var texts []string
	var final *abi.GenerateResponse
	for v, err := range agent.GenerateStream(t.Context(), c.r, c.p.Model("fake-model"), agent.WithPrompt(prompt)) {
		if err != nil {
			t.Fatalf("%v (the server held the stream until the first chunk arrived: the plugin did not forward it)", err)
		}
		if v.Done {
			final = v.Response
			continue
		}
		if text := v.Chunk.Text(); text != "" {
			texts = append(texts, text)
			release()
		}
	}
	if want := Words("echo: " + prompt); !slices.Equal(texts, want) || final == nil || final.Text() != "echo: "+prompt {
		t.Errorf("chunks %q, want %q; final %s", texts, want, JSON(final))
	}
}

// checkError checks a failed generate call of the plugin: the status, its code, the
// fake's message and the delay asked for.
func (c *cases) checkError(t *testing.T, err error, model string, status int) {
	t.Helper()
	var ce *host.CallError
	var ae *abi.Error
	if !errors.As(err, &ce) || ce.Plugin != c.p.Name || ce.Export != plugin.ExportGenerate || !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want a call error of the plugin's generate", err, err)
	}
	retry := 0.0
	if status == 429 || status == 503 || status == 529 {
		retry = RetryAfter.Seconds()
	}
	if ae.Status != status || ae.Code != provider.StatusCode(status) || !strings.Contains(ae.Message, ErrorMessage(model, status)) || ae.RetryAfter != retry {
		t.Errorf("error %+v, want status %d, code %s, retryAfter %v and the server's message", ae, status, provider.StatusCode(status), retry)
	}
}

// httpErrors: each status fails the call with its code, streamed or not.
func (c *cases) httpErrors(t *testing.T) {
	for _, status := range errorStatuses {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			model := fmt.Sprintf("http-%d", status)
			_, err := agent.Generate(t.Context(), c.r, c.p.Model(model), agent.WithPrompt("hi"))
			c.checkError(t, err, model, status)
			// Streaming requests fail the same way, before any chunk.
			for v, err := range agent.GenerateStream(t.Context(), c.r, c.p.Model(model), agent.WithPrompt("hi")) {
				if err == nil {
					t.Fatalf("streamed %s", JSON(v))
				}
				c.checkError(t, err, model, status)
			}
		})
	}
}

// errorMidStream: an error event after a chunk went out fails the call, the chunk
// delivered.
func (c *cases) errorMidStream(t *testing.T) {
	const model = "midstream-503"
	var texts []string
	var last error
	for v, err := range agent.GenerateStream(t.Context(), c.r, c.p.Model(model), agent.WithPrompt("hello there")) {
		if err != nil {
			last = err
		} else if !v.Done {
			texts = append(texts, v.Chunk.Text())
		}
	}
	var ae *abi.Error
	if !slices.Equal(texts, []string{"echo: "}) || !errors.As(last, &ae) || ae.Code != abi.CodeUnavailable || !strings.Contains(ae.Message, ErrorMessage(model, 503)) {
		t.Errorf("chunks %q, then %v", texts, last)
	}
}

// retryThenBackup: a failing model is retried, then the backup answers; a Retry-After
// past the middleware's limit stops the retries at once, which shows it reached the
// middleware.
func (c *cases) retryThenBackup(t *testing.T) {
	p := c.p
	rel := agent.Reliability{Retries: 2, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Backups: []string{p.Name + "/backup"}}
	for _, tc := range []struct {
		model    string
		maxRetry time.Duration
		attempts int
	}{
		{"http-503", 0, 3},
		{"http-429", RetryAfter / 10, 1},
	} {
		primary, backup := c.srv.Count(tc.model), c.srv.Count("backup")
		rel.MaxRetryAfter = tc.maxRetry
		text, err := agent.GenerateText(t.Context(), c.r, p.Model(tc.model), agent.WithPrompt("hi"), agent.WithMiddleware(agent.Reliable(c.r, rel)))
		if err != nil || text != "echo: hi" {
			t.Errorf("%s: %q, %v", tc.model, text, err)
		}
		if n, b := c.srv.Count(tc.model)-primary, c.srv.Count("backup")-backup; n != tc.attempts || b != 1 {
			t.Errorf("%s: %d attempts (want %d), then %d on the backup", tc.model, n, tc.attempts, b)
		}
	}
}

// timeoutThenBackup: a server that never answers is abandoned at the attempt's
// timeout (the plugin's instance with it), retried, and the backup answers. The
// timeout is the backup's too, and the backup needs a fresh instance: 3 s leaves room
// for that on a loaded machine.
func (c *cases) timeoutThenBackup(t *testing.T) {
	hung := c.srv.Count("hang")
	rel := agent.Reliability{Retries: 1, Backoff: time.Millisecond, Timeout: 3 * time.Second, Backups: []string{c.p.Name + "/backup"}}
	text, err := agent.GenerateText(t.Context(), c.r, c.p.Model("hang"), agent.WithPrompt("hi"), agent.WithMiddleware(agent.Reliable(c.r, rel)))
	if err != nil || text != "echo: hi" || c.srv.Count("hang")-hung != 2 {
		t.Errorf("%q, %v after %d attempts on the hanging model", text, err, c.srv.Count("hang")-hung)
	}
}

// noAPIKey: an empty apiKeySecret asks for no secret and sends no key (a local server,
// a gateway adding it).
func (c *cases) noAPIKey(t *testing.T) {
	srv := c.p.fakeServer(t, true)
	r, pl := c.p.Load(t, srv.URL, map[string]string{"models": "fake-model", "apiKeySecret": ""}, func(m *host.Manifest) { m.Secrets = nil })
	if s := pl.Descriptor().Capabilities.Secrets; len(s) != 0 {
		t.Errorf("secrets = %v, want none", s)
	}
	if text, err := agent.GenerateText(t.Context(), r, c.p.Model("fake-model"), agent.WithPrompt("hi")); err != nil || text != "echo: hi" {
		t.Errorf("%q, %v", text, err)
	}
}

// unreachable: a server nobody listens on, and one that hangs up on every connection:
// unavailable, without a status, worth retrying.
func (c *cases) unreachable(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	for _, url := range []string{closed.URL, "http://" + ln.Addr().String()} {
		r, _ := c.p.Load(t, url, map[string]string{"models": "fake-model"})
		_, err := agent.Generate(t.Context(), r, c.p.Model("fake-model"), agent.WithPrompt("hi"))
		var ae *abi.Error
		if !errors.As(err, &ae) || ae.Code != abi.CodeUnavailable || ae.Status != 0 || !agent.Transient(err) {
			t.Errorf("%s: %v", url, err)
		}
	}
}

// toolContent: the content parts a tool answers with reach the provider, in the
// request answering the tool's call.
func (c *cases) toolContent(t *testing.T) {
	picture := agent.NewTool("picture", "Draws a picture.", func(context.Context, struct{}) (*agent.MultipartToolResponse, error) {
		return &agent.MultipartToolResponse{Output: "drawn", Content: []*abi.Part{abi.NewTextPart("A red square."), abi.NewMediaPart("image/png", TinyPNG)}}, nil
	})
	resp := c.generate(t, "fake-model", agent.WithPrompt("Please use picture."), agent.WithTools(picture))
	reqs := c.srv.Requests()
	req := reqs[len(reqs)-1]
	var texts, urls []string
	for _, m := range req.Messages[slices.IndexFunc(req.Messages, func(m *abi.Message) bool { return len(m.ToolRequests()) > 0 })+1:] {
		for _, p := range m.Content {
			parts := []*abi.Part{p}
			if p.IsToolResponse() {
				texts = append(texts, JSON(p.ToolResponse.Output))
				parts = p.ToolResponse.Content
			}
			for _, p := range parts {
				switch {
				case p.IsText():
					texts = append(texts, p.Text)
				case p.IsMedia():
					urls = append(urls, p.Media.URL)
				}
			}
		}
	}
	if all := strings.Join(texts, " "); !strings.Contains(all, "drawn") || !strings.Contains(all, "A red square.") || !slices.Equal(urls, []string{TinyPNG}) {
		t.Errorf("after the tool call the provider got texts %q and media %q", texts, urls)
	}
	if !strings.HasSuffix(resp.Text(), "[1 image]") {
		t.Errorf("answer %q", resp.Text())
	}
	if c.p.ToolContent != nil {
		c.p.ToolContent(t, req.Body)
	}
}

// conformance runs the plugin conformance suite on the plugin talking to the fake
// server, recording its exchanges, then again offline from the recording, as a
// cassette committed for CI would replay them (terrarium plugin test --replay).
func (c *cases) conformance(t *testing.T) {
	conformancetest.RequireOffline(t, c.p.Wasm(t), conformance.Options{Manifest: c.p.Manifest(c.srv.URL, map[string]string{"models": "fake-model"})})
}
