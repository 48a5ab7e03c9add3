package deploy_test

import (
	"context"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/deploy"
	"github.com/terrarium-ai/terrarium/store"
)

// WithUsage hands on what each model call reports using, and StoredBytes counts what
// the agents' sessions take in their namespaces of the store they share.
func TestDeploymentUsageAndStoredBytes(t *testing.T) {
	reg := agent.NewRegistry()
	agent.DefineModel(reg, "test/used", nil, func(context.Context, *abi.GenerateRequest, agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage("ok"), FinishReason: abi.FinishStop,
			Usage: &abi.GenerationUsage{InputTokens: 7, OutputTokens: 3}}, nil
	})
	var files []*deploy.File
	for _, name := range []string{"a", "b"} {
		f, err := deploy.Parse(name+".yaml", []byte("name: "+name+"\nmodel: {name: test/used}\n"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var mu sync.Mutex
	var used []abi.GenerationUsage
	st := store.NewMemory()
	d, err := deploy.New(t.Context(), files, deploy.WithRegistry(reg), deploy.WithStore(st), quiet,
		deploy.WithUsage(func(_ context.Context, u *abi.GenerationUsage) {
			mu.Lock()
			defer mu.Unlock()
			used = append(used, *u)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if n, err := d.StoredBytes(t.Context()); err != nil || n != 0 {
		t.Fatalf("before any session: %d, %v", n, err)
	}
	a, _ := d.Agent("a")
	turnInSession(t, a, "s", "hi")
	mu.Lock()
	if len(used) != 1 || used[0].InputTokens != 7 || used[0].OutputTokens != 3 {
		t.Errorf("usage handed on: %+v", used)
	}
	mu.Unlock()
	want, err := st.Stats(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.StoredBytes(t.Context()); err != nil || n != want.Bytes || n == 0 {
		t.Errorf("stored bytes: %d, %v; the store counts %d", n, err, want.Bytes)
	}
}
