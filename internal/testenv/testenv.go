// Package testenv decides what a test does when something outside the repository that
// it needs is missing (../shared, npm, a browser, PostgreSQL, a toolchain): on a
// developer's machine it skips, saying what is missing and how to provide it; in CI
// (CI set in the environment) it fails, since .ci/run provides everything and a skip
// there would hide a test that never ran.
package testenv

import (
	"errors"
	"os"
	"os/exec"
	"testing"
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
