package host_test

// The sandbox's last leaks (issue 34, items 7 and 8): what a plugin could read that it
// was never given.

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/host"
)

// Item 7: a pooled instance's call reads nothing of the call before it through the
// kernel: not past its own input, not in the blocks it allocates. On the native
// engine it reads nothing at all it was not given; Extism's reads past its input with
// input_load_u64 (its go-sdk bounds only input_load_u8), but only what the call itself
// put in its later blocks, the earlier calls' having been zeroed.
func TestNoResidueOfTheCallBefore(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			_, r, _ := misbehaving(t, host.Manifest{MaxInstances: 1}, host.WithEngine(e.engine))
			ctx := context.Background()
			// Large enough to fill the blocks snoop allocates and reads past its
			// input, in the one instance both calls get.
			before := strings.Repeat("the call before's input. ", 1500)
			if out, err := runWith(ctx, r, "misbehave/ok", map[string]any{"text": before}); out != "fine" {
				t.Fatalf("the call before: %v, %v", out, err)
			}
			out, err := runWith(ctx, r, "misbehave/snoop", map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			seen, _ := out.(string)
			if strings.Contains(seen, "before") {
				t.Errorf("a call read the input of the call before: %.120q", seen)
			}
			if e.name == "native" && seen != "" {
				t.Errorf("a call read %d bytes it was not given (past its input, in its new blocks): %.120q", len(seen), seen)
			}
		})
	}
}

// echoedSecret is the secret the echo service below writes back: its characters make
// its encodings differ from it and from one another.
const echoedSecret = "sk-test_4f/+&=?~~~???z"

// echoForms are the forms the echo service writes the secret back in, by the name
// its query's form parameter gives.
var echoForms = map[string]func(key string) string{
	"raw":       func(k string) string { return k },
	"base64":    func(k string) string { return base64.StdEncoding.EncodeToString([]byte(k)) },
	"base64url": func(k string) string { return base64.RawURLEncoding.EncodeToString([]byte(k)) },
	"query":     url.QueryEscape,
	"hex":       func(k string) string { return hex.EncodeToString([]byte(k)) },
	// The header it came in, "Bearer " and the secret, encoded whole.
	"header": func(k string) string { return base64.StdEncoding.EncodeToString([]byte("Bearer " + k)) },
}

// echoService is a loopback service that quotes the key it was sent, as an API's
// error may: in a header and in its body, in the form its query names; streamed as
// server-sent events (?stream=1), the key split between two writes some time apart;
// compressed with gzip if the request asks for it; and redirected in a loop with the
// key in the URL (/loop).
func echoService(t *testing.T) *httpProbe {
	return newHTTPProbe(t, func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop?key="+url.QueryEscape(key), http.StatusFound)
			return
		}
		echo := echoForms[r.URL.Query().Get("form")](key)
		w.Header().Set("X-Echo", "key "+echo)
		msg := `{"error":{"message":"Incorrect API key provided: ` + echo + `"}}`
		if r.URL.Query().Get("stream") == "" {
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				zw.Write([]byte(msg))
				zw.Close()
				return
			}
			w.Write([]byte(msg))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		half := strings.Index(msg, echo) + len(echo)/2
		for _, part := range []string{"data: " + msg[:half], msg[half:] + "\n\n", "data: [DONE]\n\n"} {
			w.Write([]byte(part))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond) // the first part read alone
		}
	})
}

// Item 8: a plugin reads nothing of a secret its service writes back, in any of the
// forms the service may write it in, in a header or in the body, whole or streamed
// with the secret split between two reads, compressed or not, nor in the URL of a
// redirect its error quotes. A body in an encoding the host cannot search is refused.
func TestEchoedSecretIsRedacted(t *testing.T) {
	api := echoService(t)
	h, r := newHost(t)
	load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)},
		Secrets: map[string]host.Secret{"TOKEN": {Value: echoedSecret}}})
	ctx := context.Background()
	fetch := func(query string, headers map[string]string) result {
		headers["Authorization"] = "Bearer {{secret:TOKEN}}"
		return call(t, ctx, r, "http", map[string]any{"url": api.URL + query, "headers": headers})
	}
	leaks := func(what string, s string) {
		t.Helper()
		for name, form := range echoForms {
			if f := form(echoedSecret); strings.Contains(s, f) {
				t.Errorf("%s: the plugin read the secret, in its %s form: %.300s", what, name, s)
			}
		}
	}
	for name := range echoForms {
		for _, stream := range []bool{false, true} {
			query := "/?form=" + name
			if stream {
				query += "&stream=1"
			}
			res := fetch(query, map[string]string{})
			if res.Error != nil {
				t.Fatalf("%s: %v", query, res.Error)
			}
			var got struct {
				Headers map[string]string `json:"headers"`
				Body    string            `json:"body"`
				Reads   int               `json:"reads"`
			}
			b, _ := json.Marshal(res.OK)
			json.Unmarshal(b, &got)
			leaks(query+", body", got.Body)
			leaks(query+", header", got.Headers["x-echo"])
			if !strings.Contains(got.Body, "{{secret:TOKEN}}") || !strings.Contains(got.Headers["x-echo"], "{{secret:TOKEN}}") {
				t.Errorf("%s: no placeholder where the secret was: %q, %q", query, got.Body, got.Headers["x-echo"])
			}
			if stream && got.Reads < 2 {
				t.Errorf("%s: the body came in %d read: the secret did not straddle two", query, got.Reads)
			}
		}
	}
	if !api.saw("Bearer " + echoedSecret) {
		t.Fatal("the secret did not reach its host: the test proves nothing")
	}

	// A plugin asking for gzip itself would get the compressed body as it is, unsearched.
	res := fetch("/?form=raw", map[string]string{"Accept-Encoding": "gzip"})
	b, _ := json.Marshal(res.OK)
	leaks("gzip asked for", string(b))
	if !strings.Contains(string(b), "{{secret:TOKEN}}") {
		t.Errorf("gzip asked for: %s, %v", b, res.Error)
	}
	res = fetch("/loop", map[string]string{})
	if res.Error == nil || !strings.Contains(res.Error.Message, "{{secret:TOKEN}}") {
		t.Errorf("a redirect loop quoting the secret: %+v", res)
	}
	leaks("a redirect loop", res.Error.Message)
}

// Item 8: a body in an encoding the host cannot search for secrets, which the plugin
// did not ask for, is refused; a plugin with no secrets gets it as it is.
func TestUnsearchableBodyIsRefused(t *testing.T) {
	api := newHTTPProbe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		w.Write([]byte("\x8b\x02\x80compressed"))
	})
	h, r := newHost(t)
	load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)},
		Secrets: map[string]host.Secret{"TOKEN": {Value: echoedSecret}}})
	res := call(t, context.Background(), r, "http", map[string]any{"url": api.URL})
	if res.Error == nil || res.Error.Code != abi.CodeUnavailable || !strings.Contains(res.Error.Message, `Content-Encoding "br"`) {
		t.Errorf("a body in br: %+v, want unavailable naming the encoding", res)
	}
	h, r = newHost(t)
	load(t, h, "testdata/hostcheck", host.Manifest{HTTP: []string{hostPort(api.Server)}})
	wantOK(t, "a body in br, no secrets", call(t, context.Background(), r, "http", map[string]any{"url": api.URL}))
}
