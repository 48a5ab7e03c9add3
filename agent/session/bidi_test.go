package session_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// TestMain fails the package if any test leaves a goroutine behind: no connection,
// session or generate call may outlive its work.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type chatInit struct {
	Prefix string `json:"prefix"`
}

func echoFlow(r *agent.Registry) *session.BidiFlow[chatInit, string, string, string] {
	return session.DefineBidiFlow(r, "echo", func(ctx context.Context, init chatInit, inCh <-chan string, outCh chan<- string) (string, error) {
		n := 0
		for in := range inCh {
			n++
			select {
			case outCh <- init.Prefix + in:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return fmt.Sprintf("processed %d messages", n), nil
	})
}

func TestBidiEchoAndRegistration(t *testing.T) {
	r := agent.NewRegistry()
	flow := echoFlow(r)
	d := r.Lookup("/bidi-flow/echo").Desc()
	if d.InitSchema["type"] != "object" || d.StreamSchema["type"] != "string" || d.InputSchema["type"] != "string" {
		t.Errorf("descriptor = %+v", d)
	}
	conn, err := flow.StreamBidi(context.Background(), session.WithInit(chatInit{Prefix: "echo: "}))
	if err != nil {
		t.Fatal(err)
	}
	// With unbuffered channels a client reads while it sends (or per turn).
	var got []string
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for v, err := range conn.Responses() {
			if err != nil {
				t.Error(err)
				return
			}
			got = append(got, v)
		}
	}()
	for _, s := range []string{"hello", "world"} {
		if err := conn.Send(s); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	// Read everything first: Output discards what is still streamed.
	<-readDone
	out, err := conn.Output()
	if err != nil || out != "processed 2 messages" {
		t.Fatalf("output = %q, %v", out, err)
	}
	if fmt.Sprint(got) != "[echo: hello echo: world]" {
		t.Errorf("responses = %v", got)
	}
	if err := conn.Send("late"); !errors.Is(err, session.ErrConnectionClosed) {
		t.Errorf("send after close: %v", err)
	}
	select {
	case <-conn.Done():
	default:
		t.Error("Done not closed after Output")
	}
}

func TestBidiBackpressure(t *testing.T) {
	release := make(chan struct{})
	flow := session.NewBidiAction("slow", func(ctx context.Context, _ struct{}, inCh <-chan int, outCh chan<- int) (int, error) {
		<-release
		sum := 0
		for v := range inCh {
			sum += v
		}
		return sum, nil
	})
	conn, _ := flow.StreamBidi(context.Background())
	sent := make(chan error, 1)
	go func() { sent <- conn.Send(1) }()
	select {
	case <-sent:
		t.Fatal("Send returned before the action read the input")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if out, err := conn.Output(); out != 1 || err != nil {
		t.Errorf("output = %d, %v", out, err)
	}
}

func TestBidiConcurrentSends(t *testing.T) {
	flow := session.NewBidiAction("count", func(ctx context.Context, _ struct{}, inCh <-chan int, outCh chan<- int) (map[int]int, error) {
		seen := map[int]int{}
		for v := range inCh {
			seen[v]++
		}
		return seen, nil
	})
	conn, _ := flow.StreamBidi(context.Background())
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := conn.Send(g*1000 + i); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	conn.Close()
	seen, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 16*50 {
		t.Fatalf("received %d distinct inputs, want %d", len(seen), 16*50)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("input %d received %d times", v, n)
		}
	}
}

func TestBidiCloseWhileSending(t *testing.T) {
	// A Send blocked on an action that never reads is released by Close with an error,
	// not left hanging and not a panic.
	flow := session.NewBidiAction("deaf", func(ctx context.Context, _ struct{}, inCh <-chan int, outCh chan<- int) (int, error) {
		<-ctx.Done()
		return 0, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	conn, _ := flow.StreamBidi(ctx)
	errs := make(chan error, 4)
	started := make(chan struct{})
	for range 4 {
		go func() {
			started <- struct{}{}
			errs <- conn.Send(1)
		}()
	}
	for range 4 {
		<-started
	}
	// Each Send is blocked or about to be: either way Close must release it with
	// ErrConnectionClosed.
	conn.Close()
	for range 4 {
		if err := <-errs; !errors.Is(err, session.ErrConnectionClosed) {
			t.Errorf("blocked send: %v", err)
		}
	}
	cancel()
	if _, err := conn.Output(); !errors.Is(err, context.Canceled) {
		t.Errorf("output: %v", err)
	}
	<-conn.Done()
}

func TestBidiErrorReachesIteratorAndOutput(t *testing.T) {
	boom := errors.New("boom")
	flow := session.NewBidiAction("fail", func(ctx context.Context, _ struct{}, inCh <-chan int, outCh chan<- int) (int, error) {
		v := <-inCh
		outCh <- v * 2
		return 0, boom
	})
	conn, _ := flow.StreamBidi(context.Background())
	go conn.Send(21)
	var vals []int
	var iterErr error
	for v, err := range conn.Responses() {
		if err != nil {
			iterErr = err
			break
		}
		vals = append(vals, v)
	}
	if len(vals) != 1 || vals[0] != 42 || !errors.Is(iterErr, boom) {
		t.Errorf("iterator got %v then %v", vals, iterErr)
	}
	if _, err := conn.Output(); !errors.Is(err, boom) {
		t.Errorf("output: %v", err)
	}
}

func TestBidiCancelEndsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started := make(chan struct{})
	// A careless body: a plain send that nobody will ever receive, and no ctx check.
	flow := session.NewBidiAction("stuck", func(ctx context.Context, _ struct{}, inCh <-chan int, outCh chan<- int) (int, error) {
		close(started)
		outCh <- 1
		outCh <- 2
		for range inCh {
		}
		return 7, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	conn, _ := flow.StreamBidi(ctx)
	<-started
	cancel()
	if _, err := conn.Output(); !errors.Is(err, context.Canceled) {
		t.Errorf("output after cancel: %v", err)
	}
	<-conn.Done()
	if _, err := conn.Output(); !errors.Is(err, context.Canceled) {
		t.Errorf("output after done: %v", err)
	}
	var iterErr error
	for _, err := range conn.Responses() {
		iterErr = err
	}
	if !errors.Is(iterErr, context.Canceled) {
		t.Errorf("iterator after cancel: %v", iterErr)
	}
	if err := conn.Send(1); err == nil {
		t.Error("send after cancel succeeded")
	}
}

func TestBidiFlowSpanCoversConnection(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	flow := echoFlow(agent.NewRegistry())
	conn, _ := flow.StreamBidi(context.Background())
	if n := len(rec.Started()); n != 1 {
		t.Fatalf("%d spans started at StreamBidi, want 1", n)
	}
	go func() {
		for range conn.Responses() {
		}
	}()
	conn.Send("a")
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("span ended while the connection is open")
	}
	conn.Close()
	conn.Output()
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "echo" {
		t.Fatalf("ended spans = %v", ended)
	}
}
