package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

func TestLimiterConcurrentTurns(t *testing.T) {
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ConcurrentTurns: 2}})
	d1, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d2, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.StartTurn(t.Context())
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "concurrentTurns" || qe.RetryAfter <= 0 || !errors.Is(err, ErrOverQuota) {
		t.Fatalf("a third turn: %v", err)
	}
	d1()
	d1() // done twice frees one place only
	d3, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	if _, err := l.StartTurn(t.Context()); err == nil {
		t.Error("a done called twice freed two places")
	}
	d2()
	d3()
}

func TestLimiterTurnsPerMinute(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{TurnsPerMinute: 2, ConcurrentTurns: 1}})
	l.now = func() time.Time { return now }
	for range 2 { // the burst
		done, err := l.StartTurn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	_, err := l.StartTurn(t.Context())
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "turnsPerMinute" || qe.RetryAfter != 30*time.Second {
		t.Fatalf("a third turn in the minute: %v", err)
	}
	// The refused turn took no place of the concurrency quota, nor of the rate.
	now = now.Add(30 * time.Second)
	done, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatalf("30s later: %v", err)
	}
	done()
}

func TestLimiterConcurrentSessions(t *testing.T) {
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ConcurrentSessions: 1}})
	closeFirst, err := l.OpenSession()
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.OpenSession()
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "concurrentSessions" {
		t.Fatalf("a second session: %v", err)
	}
	closeFirst()
	closeFirst() // closing twice frees one place only
	if _, err := l.OpenSession(); err != nil {
		t.Fatalf("once the first closed: %v", err)
	}
	if _, err := l.OpenSession(); err == nil {
		t.Error("a close called twice freed two places")
	}
}

func TestLimiterWebSockets(t *testing.T) {
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{WebSockets: 1}})
	closeFirst, err := l.OpenWebSocket()
	if err != nil {
		t.Fatal(err)
	}
	var qe *QuotaError
	if _, err := l.OpenWebSocket(); !errors.As(err, &qe) || qe.Quota != "webSockets" || qe.RetryAfter == 0 {
		t.Fatalf("a second WebSocket: %v", err)
	}
	closeFirst()
	if _, err := l.OpenWebSocket(); err != nil {
		t.Fatalf("once the first closed: %v", err)
	}
	// Without the quota, the default bounds them.
	l = NewLimiter(&Tenant{ID: "b"})
	for i := range DefaultWebSockets {
		if _, err := l.OpenWebSocket(); err != nil {
			t.Fatalf("WebSocket %d of the default %d: %v", i+1, DefaultWebSockets, err)
		}
	}
	if _, err := l.OpenWebSocket(); !errors.As(err, &qe) || qe.Limit != DefaultWebSockets {
		t.Errorf("a WebSocket past the default: %v", err)
	}
}

func TestLimiterPluginTime(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{PluginSecondsPerMinute: 6}}) // 100 ms a second
	l.now = func() time.Time { return now }
	leave, err := l.Enter(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	leave(5 * time.Second) // within the minute's 6 s
	leave, err = l.Enter(t.Context(), "p")
	if err != nil {
		t.Fatalf("with 1 s left: %v", err)
	}
	leave(3 * time.Second) // overruns the budget by 2 s
	_, err = l.Enter(t.Context(), "p")
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "pluginSecondsPerMinute" || qe.RetryAfter != 21*time.Second {
		t.Fatalf("a call past the budget: %v", err)
	}
	// 2 s of debt and a millisecond to spend refill at 100 ms a second.
	now = now.Add(21 * time.Second)
	if _, err := l.Enter(t.Context(), "p"); err != nil {
		t.Errorf("once the budget refilled: %v", err)
	}
}

func TestLimiterModelTokensPerDay(t *testing.T) {
	now := time.Unix(1e9, 0).Truncate(time.Minute) // the window counts by the minute
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ModelTokensPerDay: 1000}})
	l.now = func() time.Time { return now }
	l.CountUsage(t.Context(), &abi.GenerationUsage{InputTokens: 400, OutputTokens: 200})
	done, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatalf("600 of 1000 tokens used: %v", err)
	}
	done()
	now = now.Add(time.Hour)
	l.CountUsage(t.Context(), &abi.GenerationUsage{InputTokens: 300, OutputTokens: 200}) // overruns the day's 1000
	_, err = l.StartTurn(t.Context())
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "modelTokensPerDay" || qe.RetryAfter != 23*time.Hour || !errors.Is(err, ErrOverQuota) {
		t.Fatalf("1100 of 1000 tokens used: %v", err)
	}
	// Once the first 600 leave the window, 500 are used: there is room again.
	now = now.Add(23 * time.Hour)
	if done, err = l.StartTurn(t.Context()); err != nil {
		t.Fatalf("a day after the first 600: %v", err)
	}
	done()
}

func TestLimiterModelTokensCountsTotalWithoutParts(t *testing.T) {
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ModelTokensPerDay: 100}})
	l.CountUsage(t.Context(), &abi.GenerationUsage{TotalTokens: 100})
	if _, err := l.StartTurn(t.Context()); !errors.Is(err, ErrOverQuota) {
		t.Fatalf("a model reporting a total only: %v", err)
	}
}

func TestLimiterStoredBytes(t *testing.T) {
	now := time.Unix(1e9, 0)
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{StoredBytes: 100}})
	l.now = func() time.Time { return now }
	stored, measured := int64(100), 0
	l.SetStorage(func(context.Context) (int64, error) {
		measured++
		return stored, nil
	})
	done, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatalf("before any measure: %v", err)
	}
	done()
	if err := l.MeasureStorage(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = l.StartTurn(t.Context())
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "storedBytes" || qe.RetryAfter != 0 || !strings.Contains(err.Error(), "storedBytes") {
		t.Fatalf("100 of 100 bytes stored: %v", err)
	}
	// The store is read at most once in storageEvery.
	stored = 10
	l.MeasureStorage(t.Context())
	if _, err := l.StartTurn(t.Context()); err == nil || measured != 1 {
		t.Fatalf("measured again at once (%d measures): %v", measured, err)
	}
	now = now.Add(storageEvery)
	l.MeasureStorage(t.Context())
	if done, err = l.StartTurn(t.Context()); err != nil {
		t.Fatalf("once space was freed: %v", err)
	}
	done()
}

// queuedLimiter returns a limiter of one running turn and one queued, whose queue
// timeout is the channel returned: a turn that joins the line says so on queued.
func queuedLimiter(t *testing.T) (l *Limiter, queued <-chan struct{}, timeout chan time.Time) {
	l = NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ConcurrentTurns: 1, QueuedTurns: 1}})
	q := make(chan struct{}, 1)
	timeout = make(chan time.Time)
	l.after = func(d time.Duration) <-chan time.Time {
		if d != DefaultTurnQueueTimeout {
			t.Errorf("a queued turn waits %v, want the default %v", d, DefaultTurnQueueTimeout)
		}
		q <- struct{}{}
		return timeout
	}
	return l, q, timeout
}

type started struct {
	done func()
	err  error
}

// waitQueued waits until a turn started with startTurn joins the line.
func waitQueued(t *testing.T, queued <-chan struct{}, turn <-chan started) {
	t.Helper()
	select {
	case <-queued:
	case got := <-turn:
		t.Fatalf("the turn did not wait in line: %v", got.err)
	}
}

// startTurn starts a turn in a goroutine: its outcome comes on the channel.
func startTurn(ctx context.Context, l *Limiter) <-chan started {
	out := make(chan started, 1)
	go func() {
		done, err := l.StartTurn(ctx)
		out <- started{done, err}
	}()
	return out
}

func TestLimiterQueuedTurnWaitsForAPlace(t *testing.T) {
	l, queued, _ := queuedLimiter(t)
	first, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second := startTurn(t.Context(), l)
	waitQueued(t, queued, second)
	// The line is full: a third is refused at once.
	_, err = l.StartTurn(t.Context())
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "concurrentTurns" || qe.RetryAfter != time.Second {
		t.Fatalf("a third turn, the line full: %v", err)
	}
	first()
	got := <-second
	if got.err != nil {
		t.Fatalf("the queued turn, a place freed: %v", got.err)
	}
	// It left the line: another may wait in it.
	third := startTurn(t.Context(), l)
	waitQueued(t, queued, third)
	got.done()
	if got := <-third; got.err != nil {
		t.Fatalf("a turn queued after the first left the line: %v", got.err)
	} else {
		got.done()
	}
}

func TestLimiterQueuedTurnTimesOut(t *testing.T) {
	l, queued, timeout := queuedLimiter(t)
	first, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	second := startTurn(t.Context(), l)
	waitQueued(t, queued, second)
	timeout <- time.Time{}
	got := <-second
	var qe *QuotaError
	if !errors.As(got.err, &qe) || qe.Quota != "concurrentTurns" || qe.RetryAfter != time.Second {
		t.Fatalf("a queued turn past its wait: %v", got.err)
	}
	// It left the line, and took no place.
	third := startTurn(t.Context(), l)
	waitQueued(t, queued, third)
	first()
	if got := <-third; got.err != nil {
		t.Fatalf("a turn queued after one timed out: %v", got.err)
	}
}

func TestLimiterQueuedTurnCancelled(t *testing.T) {
	l, queued, _ := queuedLimiter(t)
	first, err := l.StartTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	ctx, cancel := context.WithCancelCause(t.Context())
	gone := errors.New("the client left")
	second := startTurn(ctx, l)
	waitQueued(t, queued, second)
	cancel(gone)
	if got := <-second; !errors.Is(got.err, gone) {
		t.Fatalf("a queued turn whose client left: %v, want %v", got.err, gone)
	}
	third := startTurn(t.Context(), l)
	waitQueued(t, queued, third) // the line has room again
	first()
	if got := <-third; got.err != nil {
		t.Fatalf("a turn queued after one was cancelled: %v", got.err)
	}
}
