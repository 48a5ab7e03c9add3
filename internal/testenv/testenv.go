// Package testenv decides what a test does when something outside the repository that
// it needs is missing (../shared, npm, a browser, PostgreSQL, a toolchain): on a
// developer's machine it skips, saying what is missing and how to provide it; in CI
// (CI set in the environment) it fails, since .ci/run provides everything and a skip
// there would hide a test that never ran.
package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// InCI reports whether the tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") != "" }

// Need skips t, or fails it in CI, when err says something it needs is missing. what
// names the thing and how to get it ("../shared beside the checkout").
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("needs %s: %v (CI is set, so this test may not skip)", what, err)
	}
	t.Skipf("skipped: needs %s: %v", what, err)
}

// NPMVar is the environment variable that lets tests install npm packages (each from
// its lock file, into a temporary directory): without it no test touches the network.
// .ci/run sets it.
const NPMVar = "TERRARIUM_NPM_TESTS"

// NeedNPM skips t, or fails it in CI, unless NPMVar is set and node and npm are on
// PATH. It returns their paths.
func NeedNPM(t testing.TB) (node, npm string) {
	t.Helper()
	if os.Getenv(NPMVar) == "" {
		Need(t, "npm packages, which tests install only with "+NPMVar+"=1", errors.New(NPMVar+" is not set"))
	}
	node, err := exec.LookPath("node")
	Need(t, "Node.js (node on PATH)", err)
	npm, err = exec.LookPath("npm")
	Need(t, "npm on PATH", err)
	return node, npm
}

// NPMInstall copies the files of the directory src (package.json, its lock file, the
// scripts) into a fresh temporary directory, so that node_modules never lands in the
// repository, and runs npm ci there. It skips or fails t as NeedNPM does, and returns
// the directory and the path of node.
func NPMInstall(t testing.TB, src string) (dir, node string) {
	t.Helper()
	dir = t.TempDir()
	return dir, NPMInstallIn(t, src, dir)
}

// NPMInstallIn is NPMInstall into the existing directory dir, for tests that share one
// install (made once, in a directory that outlives the first test). It returns the
// path of node.
func NPMInstallIn(t testing.TB, src, dir string) (node string) {
	t.Helper()
	node, npm := NeedNPM(t)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in a copy of %s: %v\n%s", src, err, out)
	}
	t.Logf("npm ci (%s): %v", src, time.Since(start).Round(time.Millisecond))
	return node
}
