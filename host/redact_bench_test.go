package host_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// BenchmarkSecretRedaction measures what hiding a plugin's secrets in the responses it
// reads costs (package redact): hostcheck's http tool reading a 4 MiB body of
// server-sent events, streamed from a loopback server 16 KiB at a time, granted a
// secret (its responses searched for the secret's forms) and not, the two taking
// turns within each iteration. It reports each one's time and throughput, and their
// ratio.
func BenchmarkSecretRedaction(b *testing.B) {
	const size = 4 << 20
	event := `data: {"choices":[{"delta":{"content":"a token, and another"}}]}` + "\n\n"
	body := []byte(strings.Repeat(event, size/len(event)))
	api := newHTTPProbe(&testing.T{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 16<<10)
			w.Write(rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	})
	defer api.Close()
	ctx := context.Background()
	input := map[string]any{"url": api.URL, "discard": true, "headers": map[string]string{"Authorization": "Bearer {{secret:TOKEN}}"}}
	var tools []agent.Tool
	for _, secret := range []string{"", "sk-live_4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"} {
		h, r := newHost(&testing.T{})
		defer h.Close(ctx)
		m := host.Manifest{HTTP: []string{hostPort(api.Server)}, Secrets: map[string]host.Secret{"TOKEN": {Value: secret}}}
		if _, err := h.Load(ctx, benchWasm(b, "testdata/hostcheck"), m); err != nil {
			b.Fatal(err)
		}
		tool, err := r.LookupTool("hostcheck/http")
		if err != nil {
			b.Fatal(err)
		}
		out, err := tool.Run(ctx, input)
		var res struct {
			OK struct {
				Length int `json:"length"`
			} `json:"ok"`
		}
		got, _ := json.Marshal(out)
		if json.Unmarshal(got, &res); err != nil || res.OK.Length != len(body) {
			b.Fatalf("read %s, %v; not %d bytes", got, err, len(body))
		}
		tools = append(tools, tool)
	}
	spent := runInTurns(b, tools, input)
	n := float64(b.N)
	for v, name := range []string{"plain", "redacted"} {
		b.ReportMetric(float64(spent[v].Nanoseconds())/n/1e6, "ms/"+name)
		b.ReportMetric(float64(len(body))*n/spent[v].Seconds()/1e6, "MB/s-"+name)
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "redacted/plain")
}
