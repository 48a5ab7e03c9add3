package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RegistryBinary is the CNCF distribution registry server of Debian's docker-registry
// package, which .ci/run installs.
const RegistryBinary = "/usr/bin/docker-registry"

// Registry is an OCI registry (the CNCF distribution server) a test started on a
// loopback port, its storage in a temporary directory.
type Registry struct {
	// Addr is where it listens: 127.0.0.1:<port>, a registry name for references.
	Addr string
	// Storage is its storage directory: its blobs are files under
	// docker/registry/v2/blobs/sha256/.
	Storage string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartRegistry starts a registry for t, stopped when t ends. It skips t, or fails it
// in CI, when docker-registry is not installed.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	bin, err := exec.LookPath(RegistryBinary)
	Need(t, "Debian's docker-registry package (apt-get install docker-registry; .ci/run installs it)", err)
	dir := t.TempDir()
	r := &Registry{Storage: filepath.Join(dir, "storage"), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = ln.Addr().String()
	ln.Close() // the registry listens there itself; another taker in between fails the wait below
	config := fmt.Sprintf(`version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
  cache: {blobdescriptor: ""}
http:
  addr: %s
`, r.Storage, r.Addr)
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "serve", configPath)
	// Its log (every 404 a client's probe earns is an error there) is shown only when
	// the test fails.
	var log lockedBuffer
	r.cmd.Stdout, r.cmd.Stderr = &log, &log
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("the registry's log:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/v2/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-r.done:
			t.Fatalf("the registry exited before answering on %s", r.Addr)
		case <-ctx.Done():
			t.Fatalf("the registry did not answer on %s within 30s: %v", r.Addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the registry and waits for it to exit (at most 10s); its address then
// refuses connections. Stopping it twice is harmless.
func (r *Registry) Stop() {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Kill()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
}

// lockedBuffer is a buffer written by a process's two output pipes at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
