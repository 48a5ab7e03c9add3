package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeServer streams a fixed answer in OpenAI's format and records the request.
func fakeServer(t *testing.T, wantAuth string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != wantAuth {
			t.Errorf("request %s %s, Authorization %q (want %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"), wantAuth)
		}
		var body struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if body.Model != "llama3.2" || !body.Stream || len(body.Messages) != 1 || body.Messages[0].Content != "Why is the sky blue?" {
			t.Errorf("body = %+v", body)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"role":"assistant","content":""}`, `{"reasoning":"Rayleigh."}`, `{"content":"Because of "}`, `{"content":"Rayleigh scattering."}`} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", d)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":5,\"total_tokens\":11}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestOpenAICompatibleExample(t *testing.T) {
	for _, key := range []string{"sk-test", ""} {
		want := ""
		if key != "" {
			want = "Bearer " + key
		}
		srv := fakeServer(t, want)
		var out bytes.Buffer
		err := run(context.Background(), &out, []string{"Why is the sky", "blue?"},
			env(map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": key, "OPENAI_MODEL": "llama3.2"}), "../../plugins/openai")
		if err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "[thinking: Rayleigh.]\nBecause of Rayleigh scattering.\n(llama3.2, finish stop, 6 tokens in, 5 out)\n" {
			t.Errorf("key %q: output %q", key, got)
		}
	}
}

func TestOpenAICompatibleExampleNeedsItsVariables(t *testing.T) {
	ok := map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_API_KEY": "", "OPENAI_MODEL": "llama3.2"}
	for _, tc := range []struct {
		unset, set, value string
		args              []string
		says              string
	}{
		{unset: "OPENAI_BASE_URL", args: []string{"hi"}, says: "OPENAI_BASE_URL not set"},
		{unset: "OPENAI_API_KEY", args: []string{"hi"}, says: "OPENAI_API_KEY not set"},
		{set: "OPENAI_MODEL", value: " ", args: []string{"hi"}, says: "OPENAI_MODEL is empty"},
		{set: "OPENAI_BASE_URL", value: "localhost:11434", args: []string{"hi"}, says: "not an http or https URL"},
		{says: "no prompt"},
	} {
		vars := map[string]string{}
		for k, v := range ok {
			vars[k] = v
		}
		delete(vars, tc.unset)
		if tc.set != "" {
			vars[tc.set] = tc.value
		}
		err := run(context.Background(), &bytes.Buffer{}, tc.args, env(vars), "../../plugins/openai")
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "usage:") {
			t.Errorf("%+v: err = %v", tc, err)
		}
	}
}
