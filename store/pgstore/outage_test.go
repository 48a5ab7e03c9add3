package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// retryLog is a slog.Handler that counts the store's retries and signals the first.
type retryLog struct {
	n     *atomic.Int64
	first chan struct{}
	once  *sync.Once
}

func newRetryLog() retryLog {
	return retryLog{n: new(atomic.Int64), first: make(chan struct{}), once: new(sync.Once)}
}

func (h retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pgstore: retrying" {
		h.n.Add(1)
		h.once.Do(func() { close(h.first) })
	}
	return nil
}
func (h retryLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retryLog) WithGroup(string) slog.Handler      { return h }

// commitCutter relays connections to a PostgreSQL server and, while armed, cuts the
// connection that sends a COMMIT right after relaying it: the server commits, and the
// client never hears so. That is the commit whose outcome the client cannot know.
type commitCutter struct {
	ln      net.Listener
	network string
	addr    string
	armed   atomic.Bool
	cuts    atomic.Int32
}

// newCommitCutter relays to the server of the PostgreSQL URL target and returns the
// URL to use instead, which reaches it through the relay.
func newCommitCutter(t *testing.T, target string) (*commitCutter, string) {
	cfg, err := pgconn.ParseConfig(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &commitCutter{network: "tcp", addr: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	if strings.HasPrefix(cfg.Host, "/") {
		c.network, c.addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	c.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		c.ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := c.ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { c.relay(client) })
		}
	})
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	u.Host = c.ln.Addr().String()
	return c, u.String()
}

func (c *commitCutter) relay(client net.Conn) {
	defer client.Close()
	server, err := net.Dial(c.network, c.addr)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		io.Copy(client, server)
		client.Close()
	}()
	// The startup message has no type byte; every message after it has one.
	if !forward(server, client, false, nil) {
		return
	}
	for forward(server, client, true, c.cut) {
	}
}

// cut reports whether to cut the connection after relaying a message.
func (c *commitCutter) cut(typ byte, body []byte) bool {
	isCommit := typ == 'Q' && strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit")
	if !isCommit || !c.armed.CompareAndSwap(true, false) {
		return false
	}
	c.cuts.Add(1)
	return true
}

// forward relays one message of the PostgreSQL protocol from src to dst, and reports
// whether the connection goes on.
func forward(dst io.Writer, src io.Reader, typed bool, cut func(byte, []byte) bool) bool {
	head := make([]byte, 4)
	if typed {
		head = make([]byte, 5)
	}
	if _, err := io.ReadFull(src, head); err != nil {
		return false
	}
	n := int(binary.BigEndian.Uint32(head[len(head)-4:])) - 4
	if n < 0 || n > 1<<30 {
		return false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(src, body); err != nil {
		return false
	}
	if _, err := dst.Write(append(head, body...)); err != nil {
		return false
	}
	return !typed || !cut(head[0], body)
}

// The connection breaks after the server got COMMIT and before the client heard back:
// the commit landed, and Commit must say so, not fail and not write it twice.
func TestCommitOutcomeUnknown(t *testing.T) {
	cutter, url := newCommitCutter(t, pgtest.URL(t))
	log := newRetryLog()
	s := open(t, url, WithLogger(slog.New(log)))
	defer s.Close()
	ctx := t.Context()
	first := store.Record{ID: "first", Session: "s"}
	if err := s.Commit(ctx, "ns", first, nil); err != nil {
		t.Fatal(err)
	}

	cutter.armed.Store(true)
	second := store.Record{ID: "second", Session: "s", Parent: "first", Turn: 1, Data: []byte("x")}
	if err := s.Commit(ctx, "ns", second, []store.Blob{{Key: "k", Data: []byte("blob")}}); err != nil {
		t.Fatalf("Commit whose acknowledgement was lost: %v", err)
	}
	if cutter.cuts.Load() != 1 || log.n.Load() == 0 {
		t.Fatalf("the relay cut %d commits and the store retried %d times; want a cut and a retry", cutter.cuts.Load(), log.n.Load())
	}
	recs, err := s.Records(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].ID != "second" {
		t.Fatalf("records after the lost acknowledgement: %v", recs)
	}
	if h, err := s.Head(ctx, "ns", "s"); err != nil || h.ID != "second" {
		t.Fatalf("Head = %q, %v; want second", h.ID, err)
	}
	// The first attempt is what landed: the line from first is taken by second.
	var conflict *store.ConflictError
	if err := s.Commit(ctx, "ns", store.Record{ID: "rival", Session: "s", Parent: "first", Turn: 1}, nil); !errors.As(err, &conflict) || conflict.Continued != "second" {
		t.Fatalf("a rival continuation of first: %v, want a conflict with second", err)
	}
}

// TestDatabaseOutage stops and crashes a cluster of its own under the store.
func TestDatabaseOutage(t *testing.T) {
	c := pgtest.NewCluster(t)
	t.Run("Unavailable", func(t *testing.T) { testUnavailable(t, c) })
	t.Run("CloseStopsRetrying", func(t *testing.T) { testCloseStopsRetrying(t, c) })
	t.Run("CrashMidRun", func(t *testing.T) { testCrashMidRun(t, c) })
}

// A database down for longer than the retry period is a clear error, and a commit
// refused so can be made again once it is back.
func testUnavailable(t *testing.T, c *pgtest.Cluster) {
	ctx := t.Context()
	s := open(t, c.URL(), WithRetryPeriod(200*time.Millisecond), WithLogger(slog.New(newRetryLog())))
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of a running database: %v", err)
	}
	c.Stop()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping of a stopped database = %v, want store.ErrUnavailable", err)
	}
	rec := store.Record{ID: "while-down", Session: "unavailable"}
	err := s.Commit(ctx, "ns", rec, nil)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), rec.ID) {
		t.Errorf("Commit to a stopped database = %v, want store.ErrUnavailable naming the record", err)
	}
	if _, err := s.Head(ctx, "ns", "unavailable"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Head from a stopped database = %v, want store.ErrUnavailable", err)
	}
	c.Start()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the database is back: %v", err)
	}
	if err := s.Commit(ctx, "ns", rec, nil); err != nil {
		t.Fatalf("Commit after the database is back: %v", err)
	}
}

// Close does not wait out the retry period of calls waiting for the database.
func testCloseStopsRetrying(t *testing.T, c *pgtest.Cluster) {
	log := newRetryLog()
	s := open(t, c.URL(), WithRetryPeriod(time.Hour), WithLogger(slog.New(log)))
	c.Stop()
	defer c.Start()
	done := make(chan error, 1)
	go func() { done <- s.Commit(context.Background(), "ns", store.Record{ID: "r", Session: "closing"}, nil) }()
	select {
	case <-log.first:
	case err := <-done:
		t.Fatalf("Commit to a stopped database returned without retrying: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Commit retrying when the store closed = %v, want ErrClosed", err)
	}
}

// The database crashes while sessions are committing, and comes back. Commits in
// flight wait for it and land once; none that was acknowledged is lost, neither then
// nor after a second crash.
func testCrashMidRun(t *testing.T, c *pgtest.Cluster) {
	log := newRetryLog()
	s := open(t, c.URL(), WithRetryPeriod(time.Minute), WithLogger(slog.New(log)))
	defer s.Close()

	const writers = 4
	acked := make([][]store.Record, writers)
	acks := make(chan struct{}, 1<<16)
	var stop atomic.Bool
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	defer func() {
		stop.Store(true)
		<-stopped
	}()
	for w := range writers {
		wg.Go(func() {
			session, parent := fmt.Sprintf("crash-%d", w), ""
			for turn := 0; !stop.Load(); turn++ {
				r := store.Record{ID: fmt.Sprintf("%d-%d", w, turn), Session: session, Parent: parent, Turn: turn, Data: []byte(fmt.Sprint("turn ", turn))}
				blobs := []store.Blob{{Key: "blob-" + r.ID, Data: []byte(r.ID)}, {Key: "shared", Data: []byte("shared")}}
				if err := s.Commit(context.Background(), "ns", r, blobs); err != nil {
					t.Errorf("writer %d, turn %d: %v", w, turn, err)
					return
				}
				acked[w] = append(acked[w], r)
				parent = r.ID
				acks <- struct{}{}
			}
		})
	}
	go func() {
		wg.Wait()
		close(stopped)
	}()
	waitAcks := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-acks:
			case <-stopped:
				t.Fatal("the writers stopped")
			}
		}
	}
	waitAcks(40)
	c.Crash()
	c.Start()
	// Then 40 commits acknowledged since the database came back.
	for len(acks) > 0 {
		<-acks
	}
	waitAcks(40)
	stop.Store(true)
	<-stopped
	if t.Failed() {
		return
	}
	if log.n.Load() == 0 {
		t.Fatal("no commit was retried: the crash hit no commit in flight")
	}

	check := func(s *Store, when string) {
		t.Helper()
		ctx := t.Context()
		for w, want := range acked {
			session := fmt.Sprintf("crash-%d", w)
			got, err := s.Records(ctx, "ns", session)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, func(a, b store.Record) bool {
				return a.ID == b.ID && a.Parent == b.Parent && string(a.Data) == string(b.Data)
			}) {
				t.Fatalf("%s: session %s holds %d records, %d were acknowledged", when, session, len(got), len(want))
			}
			if h, err := s.Head(ctx, "ns", session); err != nil || h.ID != want[len(want)-1].ID {
				t.Fatalf("%s: head of %s = %q, %v; want %q", when, session, h.ID, err, want[len(want)-1].ID)
			}
			for _, r := range want {
				if b, err := s.Blob(ctx, "ns", "blob-"+r.ID); err != nil || string(b) != r.ID {
					t.Fatalf("%s: blob of %s = %q, %v", when, r.ID, b, err)
				}
			}
		}
	}
	check(s, "after the crash")
	c.Crash()
	c.Start()
	s2 := open(t, c.URL())
	defer s2.Close()
	check(s2, "after a second crash")
	t.Logf("%d commits acknowledged, %d retries", func() (n int) {
		for _, a := range acked {
			n += len(a)
		}
		return n
	}(), log.n.Load())
}
