package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

// BenchmarkServeFirstAnswer starts terrarium serve on the example assistant
// (examples/deploy/assistant.yaml, its five Go plugins given as built .wasm files),
// with the compilation cache warm and Badger in a new directory, and times it from
// exec to the answer of a first turn calling the calculator: the first answer of a
// freshly started server. serving is the time to its "serving" line.
func BenchmarkServeFirstAnswer(b *testing.B) {
	spec, err := os.ReadFile(filepath.Join(exampleDeployment, "assistant.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	deploy := b.TempDir()
	yaml := string(spec)
	for _, name := range []string{"offline", "calculator", "clock", "scratchpad", "profile"} {
		wasm := pluginbuild.ForTest(b, "../../plugins/"+name)
		yaml = strings.Replace(yaml, "path: ../../plugins/"+name+"\n", "path: "+wasm+"\n", 1)
	}
	if err := os.WriteFile(filepath.Join(deploy, "assistant.yaml"), []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	turn, _ := json.Marshal(map[string]string{"text": `/call calculator/calc {"expression": "19.99 * 3"}`})
	first := func() (serving, answered time.Duration) {
		start := time.Now()
		s := launchServe(b, "-data", b.TempDir(), deploy)
		serving = time.Since(start)
		defer func() {
			s.cmd.Process.Kill()
			<-s.exited
		}()
		var info struct{ SessionID string }
		if code := s.call(b, "POST", "/api/agents/assistant/sessions", "", &info); code != 201 {
			b.Fatalf("new session: status %d", code)
		}
		var out turnAnswer
		if code := s.call(b, "POST", "/api/agents/assistant/sessions/"+info.SessionID+"/turns", string(turn), &out); code != 200 {
			b.Fatalf("turn: status %d", code)
		}
		answered = time.Since(start)
		if !strings.Contains(out.modelText(), "59.97") {
			b.Fatalf("the turn answered %q, want the calculator's 59.97", out.modelText())
		}
		return serving, answered
	}
	first() // warms the compilation cache
	var serving, answered time.Duration
	for b.Loop() {
		s, a := first()
		serving += s
		answered += a
	}
	b.ReportMetric(float64(serving.Milliseconds())/float64(b.N), "ms/serving")
	b.ReportMetric(float64(answered.Milliseconds())/float64(b.N), "ms/first-answer")
}
