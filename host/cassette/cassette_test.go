package cassette_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host/cassette"
)

func get(t *testing.T, rt http.RoundTripper, method, url, key, body string) (int, string, http.Header, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header, nil
}

func TestRecordThenReplayOffline(t *testing.T) {
	const key = "sk-live-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Set-Cookie", "session="+key)
		w.Header().Set("X-Echo-Key", r.URL.Query().Get("key"))
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: you sent "+string(b)+" with "+r.Header.Get("Authorization")+"\n\n")
	}))
	rec := cassette.NewRecorder(nil, map[string]string{"API_KEY": key})
	status, body, _, err := get(t, rec, "POST", srv.URL+"/v1/chat?key="+key, key, `{"model":"m","n":1}`)
	if err != nil || status != 200 || !strings.Contains(body, key) {
		t.Fatalf("recording passes the exchange on unchanged: %d %q %v", status, body, err)
	}
	if _, _, _, err := get(t, rec, "GET", srv.URL+"/v1/models", key, ""); err != nil {
		t.Fatal(err)
	}
	srv.Close() // replay is offline

	path := filepath.Join(t.TempDir(), "api.cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), key) || strings.Contains(string(data), "session=") {
		t.Fatalf("the cassette holds the secret:\n%s", data)
	}
	if !strings.Contains(string(data), "{{secret:API_KEY}}") {
		t.Errorf("the cassette does not show where the secret was:\n%s", data)
	}

	// Replayed with another key, as in CI: the same request matches.
	const dummy = "sk-dummy"
	play, err := cassette.Load(path, map[string]string{"API_KEY": dummy})
	if err != nil {
		t.Fatal(err)
	}
	status, body, header, err := get(t, play, "POST", srv.URL+"/v1/chat?key="+dummy, dummy, `{"model":"m","n":1}`)
	if err != nil || status != 200 || body != "data: you sent {\"model\":\"m\",\"n\":1} with Bearer {{secret:API_KEY}}\n\n" || header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("replay: %d %q %v %v", status, body, header, err)
	}
	// Each exchange answers once; a request the cassette lacks fails clearly.
	for _, tc := range []struct{ method, url, body string }{
		{"POST", srv.URL + "/v1/chat?key=" + dummy, `{"model":"m","n":1}`},
		{"POST", srv.URL + "/v1/chat?key=" + dummy, `{"model":"m","n":2}`},
		{"DELETE", srv.URL + "/v1/models", ""},
	} {
		if _, _, _, err := get(t, play, tc.method, tc.url, dummy, tc.body); !errors.Is(err, cassette.ErrNoExchange) {
			t.Errorf("%s %s %s: %v, want ErrNoExchange", tc.method, tc.url, tc.body, err)
		}
	}
	if n := len(play.Unused()); n != 1 {
		t.Errorf("%d exchanges unused, want 1 (GET /v1/models)", n)
	}
}

func TestLoadRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(path, []byte(`{"interactions": []}`), 0o644)
	if _, err := cassette.Load(path, nil); err == nil {
		t.Error("loaded a file that is no cassette")
	}
	if _, err := cassette.Load(filepath.Join(t.TempDir(), "none.json"), nil); err == nil {
		t.Error("loaded a missing file")
	}
}
