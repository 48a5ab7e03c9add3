// Package conformancetest runs the plugin conformance suite from a Go test: a plugin's
// own tests require it to conform in one line.
package conformancetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/cassette"
	"github.com/terrarium-ai/terrarium/host/conformance"
)

// Require runs the conformance suite on wasm and fails the test, with the report's
// table, unless the plugin conforms. The table is logged either way.
func Require(t testing.TB, wasm []byte, opts conformance.Options) *conformance.Report {
	t.Helper()
	rep, err := conformance.Run(t.Context(), wasm, opts)
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if !rep.Passed {
		t.Errorf("the plugin does not conform:\n%s", table.String())
	} else {
		t.Logf("\n%s", table.String())
	}
	return rep
}

// RequireOffline runs the conformance suite twice on a plugin talking HTTP (a model
// provider): first recording its exchanges, as `terrarium plugin test --record` does,
// then answering them from the recording with no network, as `--replay` does. Both
// runs must conform, and the recording must hold none of the manifest's secret values.
// It returns the recording.
func RequireOffline(t testing.TB, wasm []byte, opts conformance.Options) cassette.Cassette {
	t.Helper()
	secrets := map[string]string{}
	for name, s := range opts.Manifest.Secrets {
		secrets[name] = s.Value
	}
	rec := cassette.NewRecorder(nil, secrets)
	recording := opts
	recording.Host = append(slices.Clip(opts.Host), host.WithHTTPTransport(rec))
	Require(t, wasm, recording)
	c := rec.Cassette()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("encoding the cassette: %v", err)
	}
	for name, v := range secrets {
		if v != "" && strings.Contains(string(raw), v) {
			t.Errorf("the cassette holds the value of secret %s", name)
		}
	}
	replaying := opts
	replaying.Host = append(slices.Clip(opts.Host), host.WithHTTPTransport(cassette.NewPlayer(c, secrets)))
	Require(t, wasm, replaying)
	return c
}
