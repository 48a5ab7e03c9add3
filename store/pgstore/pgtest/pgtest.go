// Package pgtest gives tests a PostgreSQL of their own: a fresh schema in the database
// that TERRARIUM_TEST_POSTGRES names, or a throwaway cluster they can stop and start.
//
// Both come from .ci/postgres.sh, which .ci/run uses and a developer can too (its header
// says how). Without PostgreSQL the tests skip, except under CI (the CI environment
// variable set), where they fail: CI must never pass by skipping them.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// EnvURL is the environment variable naming the database tests use, as a
// postgres:// URL. .ci/run sets it.
const EnvURL = "TERRARIUM_TEST_POSTGRES"

const howTo = "start a throwaway cluster with .ci/postgres.sh (see its header) and set " + EnvURL + " to its URL"

// unavailable skips the test, or fails it under CI.
func unavailable(t testing.TB, why string) {
	t.Helper()
	testenv.Need(t, "PostgreSQL ("+howTo+")", errors.New(why))
}

// Require skips the test, or fails it under CI, unless EnvURL is set.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvURL) == "" {
		unavailable(t, EnvURL+" is not set")
	}
}

// URL returns the URL of a new, empty schema in the database EnvURL names, made the
// first of the connection's search_path; the schema is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	Require(t)
	base := os.Getenv(EnvURL)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s=%q is not a postgres:// URL", EnvURL, base)
	}
	schema := "test_" + randomHex(t)
	run := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if err := run(t.Context(), "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("creating a schema in %s: %v", EnvURL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := run(ctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("dropping the test's schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Cluster is a throwaway PostgreSQL cluster of one test, which it may stop, crash and
// start again: what tests of a database going away need, and must not do to the
// database other tests share.
type Cluster struct {
	t       testing.TB
	script  string
	dir     string
	url     string
	command func(*exec.Cmd)
}

// ClusterOption configures NewCluster.
type ClusterOption func(*Cluster)

// WithCommand has f adjust each command the cluster is run with (.ci/postgres.sh's
// init, start, stop...) before it starts, e.g. to start it in a control group of its
// own, where PostgreSQL's processes then run (cgroup.Group.Command).
func WithCommand(f func(*exec.Cmd)) ClusterOption {
	return func(c *Cluster) { c.command = f }
}

// NewCluster initialises and starts a cluster (a few seconds), removed when the test
// ends.
func NewCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	script, err := findScript()
	if err != nil {
		unavailable(t, err.Error())
	}
	c := &Cluster{t: t, script: script}
	for _, o := range opts {
		o(c)
	}
	out, err := c.run("init")
	if err != nil {
		unavailable(t, err.Error())
	}
	c.dir = out
	t.Cleanup(func() {
		if _, err := c.run("remove", c.dir); err != nil {
			t.Errorf("removing the test's PostgreSQL cluster: %v", err)
		}
	})
	c.Start()
	return c
}

// URL is the cluster's URL; it stays the same across restarts.
func (c *Cluster) URL() string { return c.url }

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	out, err := c.run("start", c.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	c.url = out
}

// Stop shuts the cluster down cleanly ("fast": open transactions are rolled back,
// clients disconnected).
func (c *Cluster) Stop() {
	c.t.Helper()
	if _, err := c.run("stop", c.dir, "fast"); err != nil {
		c.t.Fatal(err)
	}
}

// Crash stops the cluster as if its machine had lost power: every server process is
// killed at once, and the next start recovers from the write-ahead log.
func (c *Cluster) Crash() {
	c.t.Helper()
	if _, err := c.run("stop", c.dir, "immediate"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) run(args ...string) (string, error) {
	cmd := exec.Command(c.script, args...)
	if c.command != nil {
		c.command(cmd)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(strings.TrimSpace(".ci/postgres.sh " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// findScript finds .ci/postgres.sh above the test's working directory, its package.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".ci", "postgres.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(".ci/postgres.sh not found above the working directory")
		}
		dir = parent
	}
}
