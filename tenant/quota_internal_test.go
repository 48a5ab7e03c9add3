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
	d1, err := l.StartTurn()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := l.StartTurn()
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.StartTurn()
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "concurrentTurns" || qe.RetryAfter <= 0 || !errors.Is(err, ErrOverQuota) {
		t.Fatalf("a third turn: %v", err)
	}
	d1()
	d1() // done twice frees one place only
	d3, err := l.StartTurn()
	if err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	if _, err := l.StartTurn(); err == nil {
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
		done, err := l.StartTurn()
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	_, err := l.StartTurn()
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "turnsPerMinute" || qe.RetryAfter != 30*time.Second {
		t.Fatalf("a third turn in the minute: %v", err)
	}
	// The refused turn took no place of the concurrency quota, nor of the rate.
	now = now.Add(30 * time.Second)
	done, err := l.StartTurn()
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
	done, err := l.StartTurn()
	if err != nil {
		t.Fatalf("600 of 1000 tokens used: %v", err)
	}
	done()
	now = now.Add(time.Hour)
	l.CountUsage(t.Context(), &abi.GenerationUsage{InputTokens: 300, OutputTokens: 200}) // overruns the day's 1000
	_, err = l.StartTurn()
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "modelTokensPerDay" || qe.RetryAfter != 23*time.Hour || !errors.Is(err, ErrOverQuota) {
		t.Fatalf("1100 of 1000 tokens used: %v", err)
	}
	// Once the first 600 leave the window, 500 are used: there is room again.
	now = now.Add(23 * time.Hour)
	if done, err = l.StartTurn(); err != nil {
		t.Fatalf("a day after the first 600: %v", err)
	}
	done()
}

func TestLimiterModelTokensCountsTotalWithoutParts(t *testing.T) {
	l := NewLimiter(&Tenant{ID: "a", Quotas: Quotas{ModelTokensPerDay: 100}})
	l.CountUsage(t.Context(), &abi.GenerationUsage{TotalTokens: 100})
	if _, err := l.StartTurn(); !errors.Is(err, ErrOverQuota) {
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
	done, err := l.StartTurn()
	if err != nil {
		t.Fatalf("before any measure: %v", err)
	}
	done()
	if err := l.MeasureStorage(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = l.StartTurn()
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "storedBytes" || qe.RetryAfter != 0 || !strings.Contains(err.Error(), "storedBytes") {
		t.Fatalf("100 of 100 bytes stored: %v", err)
	}
	// The store is read at most once in storageEvery.
	stored = 10
	l.MeasureStorage(t.Context())
	if _, err := l.StartTurn(); err == nil || measured != 1 {
		t.Fatalf("measured again at once (%d measures): %v", measured, err)
	}
	now = now.Add(storageEvery)
	l.MeasureStorage(t.Context())
	if done, err = l.StartTurn(); err != nil {
		t.Fatalf("once space was freed: %v", err)
	}
	done()
}
