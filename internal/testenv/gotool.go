package testenv

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// GoTool returns the path of the command a Go package builds (oras, cosign), at a
// version, installing it first with go install from the module proxy into
// terrarium/tools/<name>-<version> under the user's cache directory, where later runs
// find it. .ci/run installs the same beforehand, so that parallel test binaries never
// build one twice. It skips t, or fails it in CI, when it cannot be installed (no
// network).
func GoTool(t testing.TB, pkg, version string) string {
	t.Helper()
	name := path.Base(pkg)
	dir, err := ToolDir(name, version)
	if err != nil {
		Need(t, "a user cache directory for Go tools", err)
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.CommandContext(ctx, goCmd, "install", pkg+"@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOOS=", "GOARCH=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	Need(t, "go install "+pkg+"@"+version+" from the module proxy (.ci/run installs it)", errorWith(err, out))
	t.Logf("go install %s@%s: %v", pkg, version, time.Since(start).Round(time.Second))
	if err := os.Rename(tmp, dir); err != nil {
		// Another test binary installed it meanwhile.
		if _, statErr := os.Stat(bin); statErr != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// ToolDir is where GoTool keeps the command name at version.
func ToolDir(name, version string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "terrarium", "tools", name+"-"+version), nil
}

// errorWith adds a command's output to its error.
func errorWith(err error, out []byte) error {
	if err == nil {
		return nil
	}
	return &outputError{err, strings.TrimSpace(string(out))}
}

type outputError struct {
	err error
	out string
}

func (e *outputError) Error() string { return e.err.Error() + "\n" + e.out }
func (e *outputError) Unwrap() error { return e.err }
