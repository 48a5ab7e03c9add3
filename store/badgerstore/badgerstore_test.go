package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/terrarium-ai/terrarium/store"
	"github.com/terrarium-ai/terrarium/store/storetest"
)

func openDir(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openDir(t, t.TempDir()) })
}

func TestOpenEmptyDir(t *testing.T) {
	if _, err := Open(""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open(\"\") = %v, want ErrInvalid", err)
	}
}

// A SIGKILL cannot tell synced writes from writes left in the page cache (TestCrash
// passes either way); losing the machine can. So check the setting itself.
func TestSyncWrites(t *testing.T) {
	s := openDir(t, t.TempDir())
	defer s.Close()
	if !s.db.Opts().SyncWrites {
		t.Fatal("the database is not opened with SyncWrites")
	}
}

func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	defer s.Close()
	if s2, err := Open(dir); err == nil {
		s2.Close()
		t.Fatal("a second Open of an open directory succeeded")
	}
}

func TestReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openDir(t, dir)
	for i, turn := range []int{0, 1, 2, 1} {
		r := store.Record{ID: fmt.Sprintf("r%d", i), Session: "s", Turn: turn, Data: []byte(fmt.Sprint(i)), Branch: true}
		if err := s.Commit(ctx, "ns", r, []store.Blob{{Key: fmt.Sprintf("k%d", i), Data: []byte(fmt.Sprint("blob", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Stats(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir)
	defer s.Close()
	recs, err := s.Records(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "r0,r1,r3,r2" {
		t.Fatalf("Records after reopening = %s, want r0,r1,r3,r2", got)
	}
	if l, err := s.Head(ctx, "ns", "s"); err != nil || l.ID != "r3" {
		t.Fatalf("Head after reopening = %q, %v; want r3", l.ID, err)
	}
	for i := range 4 {
		if b, err := s.Blob(ctx, "ns", fmt.Sprintf("k%d", i)); err != nil || string(b) != fmt.Sprint("blob", i) {
			t.Fatalf("blob k%d after reopening = %q, %v", i, b, err)
		}
	}
	after, err := s.Stats(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("Stats after reopening = %+v, before %+v", after, before)
	}
	// Sequence numbers carry on from the stored counter: a new branch goes last.
	if err := s.Commit(ctx, "ns", store.Record{ID: "r4", Session: "s", Turn: 1, Branch: true}, nil); err != nil {
		t.Fatal(err)
	}
	recs, _ = s.Records(ctx, "ns", "s")
	if len(recs) != 5 || recs[3].ID != "r4" {
		t.Fatalf("a turn-1 record committed after reopening is not the last of turn 1: %v", recs)
	}
}

// The crash test runs TestCrashChild in a child process that commits, reports it, and
// is killed with SIGKILL: no deferred Close, no flush. What the child reported must be
// on disk.
const (
	crashDirEnv  = "TERRARIUM_BADGERSTORE_CRASH_DIR"
	crashModeEnv = "TERRARIUM_BADGERSTORE_CRASH_MODE"
)

// crashRecords are what the child commits before it reports.
func crashRecords() []store.Record {
	var recs []store.Record
	for i := range 5 {
		recs = append(recs, store.Record{ID: fmt.Sprintf("rec-%d", i), Session: "s", Turn: i, Data: bytes.Repeat([]byte{byte('a' + i)}, 100*i), Branch: true})
	}
	return recs
}

func crashBlobs(i int) []store.Blob {
	blobs := []store.Blob{
		{Key: fmt.Sprintf("blob-%d-a", i), Data: []byte(fmt.Sprintf("small blob %d", i))},
		{Key: fmt.Sprintf("blob-%d-b", i), Data: bytes.Repeat([]byte{byte(i)}, 4096)},
	}
	if i == 4 {
		// Above Badger's value threshold, so it goes to the value log, not the LSM tree.
		blobs = append(blobs, store.Blob{Key: "big", Data: bytes.Repeat([]byte("big blob "), 2<<20/9)})
	}
	return blobs
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestCrash")
	}
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if os.Getenv(crashModeEnv) == "turns" {
		commitTurns(t, s)
	} else {
		for i, r := range crashRecords() {
			if err := s.Commit(ctx, "ns", r, crashBlobs(i)); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				os.Exit(2)
			}
		}
	}
	fmt.Fprintln(os.Stdout, "committed")
	if os.Getenv(crashModeEnv) == "busy" {
		// Keep committing so that the kill lands in the middle of a commit; say so once
		// a few are done, for the parent to kill.
		for i := 0; ; i++ {
			r := store.Record{ID: fmt.Sprintf("busy-%d", i), Session: "busy", Turn: i, Data: []byte("x"), Branch: true}
			blobs := []store.Blob{{Key: fmt.Sprintf("busy-%d", i), Data: bytes.Repeat([]byte("y"), 1000)}}
			if err := s.Commit(ctx, "ns", r, blobs); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				os.Exit(2)
			}
			if i == 9 {
				fmt.Fprintln(os.Stdout, "busy")
			}
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}

// runCrashChild starts the child in mode, waits until it reports ready (the line it
// prints when it is where the kill must land), then kills it with SIGKILL.
func runCrashChild(t *testing.T, dir, mode, ready string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashModeEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(2 * time.Minute)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("child exited without committing; stderr:\n%s", stderr.String())
			}
			if line == ready {
				break wait
			}
		case <-timeout:
			t.Fatalf("child did not commit in time; stderr:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	go func() {
		for range lines {
		}
	}()
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
}

func checkCrashRecords(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	want := crashRecords()
	got, err := s.Records(ctx, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records survived the kill, want %d", len(got), len(want))
	}
	for i, r := range want {
		if got[i].ID != r.ID || got[i].Turn != r.Turn || !bytes.Equal(got[i].Data, r.Data) {
			t.Errorf("record %d after the kill = %+v, want %+v", i, got[i], r)
		}
		for _, b := range crashBlobs(i) {
			data, err := s.Blob(ctx, "ns", b.Key)
			if err != nil {
				t.Errorf("blob %q after the kill: %v", b.Key, err)
			} else if !bytes.Equal(data, b.Data) {
				t.Errorf("blob %q after the kill has %d bytes, want %d", b.Key, len(data), len(b.Data))
			}
		}
	}
	if l, err := s.Head(ctx, "ns", "s"); err != nil || l.ID != want[len(want)-1].ID {
		t.Errorf("Head after the kill = %q, %v", l.ID, err)
	}
}

func TestCrash(t *testing.T) {
	dir := t.TempDir()
	runCrashChild(t, dir, "sleep", "committed")
	s := openDir(t, dir)
	defer s.Close()
	checkCrashRecords(t, s)
}

// TestCrashMidCommit kills the child while it is committing: the commits it finished
// must be whole, and the one it was in must be entirely there or entirely absent.
func TestCrashMidCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child mid-commit; slow")
	}
	dir := t.TempDir()
	runCrashChild(t, dir, "busy", "busy")
	s := openDir(t, dir)
	defer s.Close()
	checkCrashRecords(t, s)
	ctx := t.Context()
	busy, err := s.Records(ctx, "ns", "busy")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range busy {
		// Commits are sequential, so what survived is a prefix of them.
		if r.ID != fmt.Sprintf("busy-%d", i) {
			t.Fatalf("busy record %d is %q: a gap in the committed sequence", i, r.ID)
		}
		if _, err := s.Blob(ctx, "ns", r.ID); err != nil {
			t.Fatalf("record %q survived without its blob: %v", r.ID, err)
		}
	}
	if _, err := s.Blob(ctx, "ns", fmt.Sprintf("busy-%d", len(busy))); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the blob of the first lost commit busy-%d is there (%v): a torn commit", len(busy), err)
	}
	if len(busy) > 0 {
		if l, err := s.Head(ctx, "ns", "busy"); err != nil || l.ID != busy[len(busy)-1].ID {
			t.Fatalf("Head of the busy session = %q, %v; want %q", l.ID, err, busy[len(busy)-1].ID)
		}
	}
	t.Logf("%d commits finished before the kill", len(busy))
}

// A value that does not decode is damage, which callers must not mistake for absence.
func TestCorruptValueIsNotNotFound(t *testing.T) {
	s := openDir(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	if err := s.Commit(ctx, "ns", store.Record{ID: "r", Session: "s"}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(recordKey("ns", "r"), []byte{99}) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, "ns", "r"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Record of a corrupt value: %v", err)
	}
	if _, err := s.Records(ctx, "ns", "s"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Records over a corrupt value: %v", err)
	}
	if _, err := s.Head(ctx, "ns", "s"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Head over a corrupt value: %v", err)
	}
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Delete(recordKey("ns", "r")) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "ns", "s"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Head naming a missing record: %v", err)
	}
	if _, err := s.Records(ctx, "ns", "s"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Records naming a missing record: %v", err)
	}
}

func TestKeysArePrefixFree(t *testing.T) {
	names := []string{"a", "ab", "b", "a\x00", "\x01a", strings.Repeat("x", 127), strings.Repeat("x", 128), strings.Repeat("x", store.MaxNameLen)}
	for _, ns1 := range names {
		for _, ns2 := range names {
			if ns1 == ns2 {
				continue
			}
			for _, kind := range []byte{kindBlob, kindRecord, kindIndex, kindLatest, kindLine} {
				p1 := nsPrefix(kind, ns1, 0)
				for _, rest := range names {
					if k := append(nsPrefix(kind, ns2, 0), rest...); bytes.HasPrefix(k, p1) {
						t.Errorf("key %q of namespace %q starts with the prefix of namespace %q", k, ns2, ns1)
					}
				}
			}
			if k := indexKey("ns", ns2, 0, 0); bytes.HasPrefix(k, indexPrefix("ns", ns1)) {
				t.Errorf("index key of session %q starts with the prefix of session %q", ns2, ns1)
			}
		}
	}
	turns := []int64{math.MinInt64, -1 << 40, -2, -1, 0, 1, 255, 256, 1 << 40, math.MaxInt64}
	for i := 1; i < len(turns); i++ {
		if a, b := indexKey("ns", "s", turns[i-1], math.MaxUint64), indexKey("ns", "s", turns[i], 0); bytes.Compare(a, b) >= 0 {
			t.Errorf("index key of turn %d does not sort before turn %d", turns[i-1], turns[i])
		}
	}
}

// recordingHandler keeps the messages logged through it.
type recordingHandler struct {
	msgs *[]string
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	*h.msgs = append(*h.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestWithLogger(t *testing.T) {
	var msgs []string
	s := openDir(t, t.TempDir(), WithLogger(slog.New(recordingHandler{&msgs})))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Badger logs at info level when it opens and closes.
	if len(msgs) == 0 {
		t.Fatal("WithLogger: nothing reached the logger")
	}
	for _, m := range msgs {
		if strings.HasSuffix(m, "\n") {
			t.Errorf("log message %q ends in a newline", m)
		}
	}

	// By default only warnings and errors reach slog.Default().
	msgs = nil
	prev := slog.Default()
	slog.SetDefault(slog.New(recordingHandler{&msgs}))
	defer slog.SetDefault(prev)
	s = openDir(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if strings.HasPrefix(m, "INFO") || strings.HasPrefix(m, "DEBUG") {
			t.Errorf("default logger got %q", m)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(store.Record{Session: "s", Data: []byte("data")}, 1))
	f.Add(encodeRecord(store.Record{Session: strings.Repeat("s", store.MaxNameLen), Parent: strings.Repeat("p", store.MaxNameLen), Turn: math.MinInt64}, math.MaxUint64))
	f.Add(encodeRecord(store.Record{Session: "session", Parent: "parent", Branch: true, Turn: math.MaxInt64, Data: bytes.Repeat([]byte{0xff}, 40)}, 0))
	f.Add([]byte{})
	f.Add([]byte{recordVersion})
	f.Add([]byte{recordVersion, 0x80})
	f.Add([]byte{recordVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(encodeLatest(7, "id"))
	f.Fuzz(func(t *testing.T, v []byte) {
		orig := bytes.Clone(v)
		rec, seq, err := decodeRecord(v)
		if !bytes.Equal(v, orig) {
			t.Fatal("decodeRecord changed its input")
		}
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decodeRecord error %v does not wrap store.ErrCorrupt", err)
			}
		} else {
			if rec.Session == "" || len(rec.Session) > store.MaxNameLen {
				t.Fatalf("decodeRecord accepted session of %d bytes", len(rec.Session))
			}
			again, seq2, err := decodeRecord(encodeRecord(rec, seq))
			if err != nil {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
			if again.Session != rec.Session || again.Parent != rec.Parent || again.Branch != rec.Branch ||
				again.Turn != rec.Turn || seq2 != seq || !bytes.Equal(again.Data, rec.Data) {
				t.Fatalf("round trip changed %+v/%d into %+v/%d", rec, seq, again, seq2)
			}
		}
		lseq, id, err := decodeLatest(v)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decodeLatest error %v does not wrap store.ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(encodeLatest(lseq, id), v) {
			t.Fatalf("decodeLatest(%x) = %d, %q, which encodes differently", v, lseq, id)
		}
	})
}

// BenchmarkWitness puts the witness's cost beside a whole commit's: every commit writes
// and syncs the witness after Badger has synced the commit.
func BenchmarkWitness(b *testing.B) {
	b.Run("commit", func(b *testing.B) {
		s := openDir(b, b.TempDir())
		defer s.Close()
		parent := ""
		for i := 0; b.Loop(); i++ {
			r := store.Record{ID: fmt.Sprint("r", i), Session: "s", Parent: parent, Turn: i, Data: bytes.Repeat([]byte("r"), 512)}
			if err := s.Commit(b.Context(), "ns", r, []store.Blob{{Key: fmt.Sprint("k", i), Data: bytes.Repeat([]byte("b"), 1024)}}); err != nil {
				b.Fatal(err)
			}
			parent = r.ID
		}
	})
	b.Run("witness alone", func(b *testing.B) {
		s := openDir(b, b.TempDir())
		defer s.Close()
		v := s.witness.want.Load()
		for b.Loop() {
			v++
			if err := s.witness.advance(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpen measures what verifying every table adds to Open, on a store of 32 MiB
// of records in its tables.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	s := openDir(b, dir)
	rng := rand.New(rand.NewChaCha8([32]byte{}))
	data := make([]byte, 16<<10)
	parent := ""
	for i := range 2048 {
		// Half random, half repeated: about as compressible as JSON messages.
		for j := range len(data) / 2 {
			data[j] = byte(rng.Uint32())
		}
		r := store.Record{ID: fmt.Sprint("r", i), Session: "s", Parent: parent, Turn: i, Data: data}
		if err := s.Commit(b.Context(), "ns", r, nil); err != nil {
			b.Fatal(err)
		}
		parent = r.ID
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, p := range tables {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	b.Logf("%d tables, %d bytes", len(tables), size)
	b.Run("open and close", func(b *testing.B) {
		for b.Loop() {
			if err := openDir(b, dir).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify tables alone", func(b *testing.B) {
		b.SetBytes(size)
		opt := badger.DefaultOptions(dir)
		for b.Loop() {
			if err := verifyTables(dir, opt); err != nil {
				b.Fatal(err)
			}
		}
	})
}
