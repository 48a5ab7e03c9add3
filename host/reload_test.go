package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host"
)

// version asks hostcheck's config tool for the config value "version": which version
// of the plugin answered.
func version(ctx context.Context, r *agent.Registry) (string, error) {
	tl, err := r.LookupTool("hostcheck/config")
	if err != nil {
		return "", err
	}
	out, err := tl.Run(ctx, map[string]any{"text": "version"})
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(out)
	var res result
	if err := json.Unmarshal(b, &res); err != nil || res.Error != nil {
		return "", fmt.Errorf("config: %s", b)
	}
	return fmt.Sprint(res.OK), nil
}

// TestReloadUnderConcurrentCalls reloads a plugin again and again while calls run:
// none fails, and each answers from a version that was loaded.
func TestReloadUnderConcurrentCalls(t *testing.T) {
	h, r := newHost(t)
	module := wasm(t, "testdata/hostcheck")
	manifest := func(v int) host.Manifest {
		return host.Manifest{Config: map[string]string{"version": fmt.Sprint(v)}, MaxInstances: 2}
	}
	if _, err := h.Load(context.Background(), module, manifest(0)); err != nil {
		t.Fatal(err)
	}
	const reloads, callers = 5, 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	calls := make([]int, callers)
	for i := range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := version(context.Background(), r)
				if err != nil || v < "0" || v > fmt.Sprint(reloads) {
					errs <- fmt.Errorf("call %d: %q, %v", calls[i], v, err)
					return
				}
				calls[i]++
			}
		})
	}
	for v := 1; v <= reloads; v++ {
		p, err := h.Reload(context.Background(), module, manifest(v))
		if err != nil {
			t.Fatalf("reload %d: %v", v, err)
		}
		if h.Plugin("hostcheck") != p {
			t.Fatalf("reload %d: the host does not hold the new version", v)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v, err := version(context.Background(), r); err != nil || v != fmt.Sprint(reloads) {
		t.Errorf("after the reloads: %q, %v", v, err)
	}
	if n := len(r.Actions()); n != len(h.Plugin("hostcheck").Keys()) {
		t.Errorf("%d registry entries for %d keys", n, len(h.Plugin("hostcheck").Keys()))
	}
}

// TestReloadLetsCallsInFlightFinishOnTheOldVersion holds a call of the old version
// open across a reload: new calls get the new version meanwhile, and the held call
// finishes on the old one.
func TestReloadLetsCallsInFlightFinishOnTheOldVersion(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(arrived)
		<-release
		fmt.Fprint(w, "answered by the server")
	}))
	defer srv.Close()
	h, r := newHost(t)
	module := wasm(t, "testdata/hostcheck")
	manifest := func(v string) host.Manifest {
		return host.Manifest{Config: map[string]string{"version": v}, HTTP: []string{strings.TrimPrefix(srv.URL, "http://")}}
	}
	if _, err := h.Load(context.Background(), module, manifest("old")); err != nil {
		t.Fatal(err)
	}
	held := make(chan result, 1)
	go func() {
		tl, _ := r.LookupTool("hostcheck/http")
		out, err := tl.Run(context.Background(), map[string]any{"url": srv.URL + "/"})
		b, _ := json.Marshal(out)
		var res result
		json.Unmarshal(b, &res)
		if err != nil {
			res.Error = nil
			res.OK = err.Error()
		}
		held <- res
	}()
	<-arrived
	reloaded := make(chan error, 1)
	go func() {
		_, err := h.Reload(context.Background(), module, manifest("new"))
		reloaded <- err
	}()
	// The new version answers while the old one still has a call in flight.
	for {
		v, err := version(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if v == "new" {
			break
		}
	}
	select {
	case err := <-reloaded:
		t.Fatalf("Reload returned (%v) before the old version's call finished", err)
	default:
	}
	close(release)
	res := <-held
	if !strings.Contains(fmt.Sprint(res.OK), "answered by the server") {
		t.Errorf("the call in flight: %+v", res)
	}
	if err := <-reloaded; err != nil {
		t.Errorf("reload: %v", err)
	}
}
