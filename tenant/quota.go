package tenant

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/host"
)

// QuotaError is the error of a turn a tenant's quota refuses: which quota, and when
// trying again may succeed.
type QuotaError struct {
	Tenant     string
	Quota      string // the Quotas field's key: "concurrentTurns", "modelTokensPerDay", …
	Limit      float64
	RetryAfter time.Duration // 0 when waiting will not help: the operator must act
}

// Error implements error.
func (e *QuotaError) Error() string {
	limit := strconv.FormatFloat(e.Limit, 'f', -1, 64)
	if e.RetryAfter == 0 {
		return fmt.Sprintf("tenant %s: %s quota of %s reached: waiting will not free it, ask the operator", e.Tenant, e.Quota, limit)
	}
	return fmt.Sprintf("tenant %s: %s quota of %s reached: retry after %v", e.Tenant, e.Quota, limit, e.RetryAfter)
}

// Unwrap returns ErrOverQuota.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }

// Limiter enforces a tenant's turn quotas. Past them it refuses at once, but for the
// few turns QueuedTurns lets wait for a place of ConcurrentTurns: a tenant waits on its
// own places only, never behind another tenant. It is safe for concurrent use.
type Limiter struct {
	tenant  string
	q       Quotas
	running chan struct{} // a token per running turn; nil without the quota
	line    chan struct{} // a token per turn waiting for a place; nil without the quota
	open    chan struct{} // a token per open session; nil without the quota
	sockets chan struct{} // a token per open WebSocket
	// after is time.After; tests replace it to learn that a turn waits, and to end
	// its wait.
	after  func(time.Duration) <-chan time.Time
	rate   *rate.Limiter // nil without the quota
	plugin *rate.Limiter // plugin time, in milliseconds; nil without the quota
	now    func() time.Time

	mu        sync.Mutex
	tokens    window                               // model tokens of the last day
	measure   func(context.Context) (int64, error) // the tenant's stored bytes; nil until SetStorage
	measuring bool
	measured  time.Time // when stored was measured; zero before
	stored    int64
}

// DefaultTurnQueueTimeout is how long a queued turn waits for a place unless the
// tenant's quotas say otherwise.
const DefaultTurnQueueTimeout = 10 * time.Second

// DefaultWebSockets bounds a tenant's WebSocket connections open at once unless its
// quotas say otherwise.
const DefaultWebSockets = 64

// storageEvery is how often, at most, a tenant's stored bytes are measured: a
// measure may read every key the tenant has stored.
const storageEvery = 30 * time.Second

// NewLimiter returns the limiter of a tenant's quotas.
func NewLimiter(t *Tenant) *Limiter {
	l := &Limiter{tenant: t.ID, q: t.Quotas, now: time.Now, after: time.After}
	if n := t.Quotas.ConcurrentTurns; n > 0 {
		l.running = make(chan struct{}, n)
		if q := t.Quotas.QueuedTurns; q > 0 {
			l.line = make(chan struct{}, q)
		}
		if l.q.TurnQueueTimeout.Duration == 0 {
			l.q.TurnQueueTimeout.Duration = DefaultTurnQueueTimeout
		}
	}
	if n := t.Quotas.ConcurrentSessions; n > 0 {
		l.open = make(chan struct{}, n)
	}
	if l.q.WebSockets == 0 {
		l.q.WebSockets = DefaultWebSockets
	}
	l.sockets = make(chan struct{}, l.q.WebSockets)
	if per := t.Quotas.TurnsPerMinute; per > 0 {
		burst := t.Quotas.TurnBurst
		if burst == 0 {
			burst = max(1, int(per))
		}
		l.rate = rate.NewLimiter(rate.Limit(per/60), burst)
	}
	if s := t.Quotas.PluginSecondsPerMinute; s > 0 {
		ms := s * 1000
		l.plugin = rate.NewLimiter(rate.Limit(ms/60), int(math.Ceil(ms)))
	}
	return l
}

var _ host.Gate = (*Limiter)(nil)

// Enter implements host.Gate: it admits a plugin call while the tenant's plugin time
// budget is not spent, and charges the call's time when it leaves.
func (l *Limiter) Enter(_ context.Context, plugin string) (leave func(ran time.Duration), err error) {
	if l.plugin == nil {
		return func(time.Duration) {}, nil
	}
	now := l.now()
	if tokens := l.plugin.TokensAt(now); tokens < 1 {
		wait := time.Duration((1 - tokens) / float64(l.plugin.Limit()) * float64(time.Second))
		return nil, &QuotaError{Tenant: l.tenant, Quota: "pluginSecondsPerMinute", Limit: l.q.PluginSecondsPerMinute,
			RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
	}
	return func(ran time.Duration) {
		// A reservation may take the budget below zero: the calls after pay for
		// this one's overrun.
		l.plugin.ReserveN(l.now(), min(max(1, int(ran.Milliseconds())), l.plugin.Burst()))
	}, nil
}

// OpenSession admits a session opening, or refuses it with a *QuotaError; an admitted
// session calls close when it is closed.
func (l *Limiter) OpenSession() (close func(), err error) {
	if l.open == nil {
		return func() {}, nil
	}
	select {
	case l.open <- struct{}{}:
		return sync.OnceFunc(func() { <-l.open }), nil
	default:
		// Room comes when one of the tenant's sessions closes: by its client, or once
		// idle for the server's idle timeout.
		return nil, &QuotaError{Tenant: l.tenant, Quota: "concurrentSessions", Limit: float64(l.q.ConcurrentSessions), RetryAfter: time.Second}
	}
}

// OpenWebSocket admits a WebSocket connection, or refuses it with a *QuotaError; an
// admitted one calls close when it closes.
func (l *Limiter) OpenWebSocket() (close func(), err error) {
	select {
	case l.sockets <- struct{}{}:
		return sync.OnceFunc(func() { <-l.sockets }), nil
	default:
		return nil, &QuotaError{Tenant: l.tenant, Quota: "webSockets", Limit: float64(l.q.WebSockets), RetryAfter: time.Second}
	}
}

// StartTurn admits a turn, or refuses it with a *QuotaError; an admitted turn calls
// done when it ends. Past ConcurrentTurns, it waits for a place if the tenant's line
// (QueuedTurns) has room, until one frees, TurnQueueTimeout passes, or ctx ends (then
// the error is ctx's cause). A refused turn counts against no quota.
func (l *Limiter) StartTurn(ctx context.Context) (done func(), err error) {
	if err := l.checkUsed(); err != nil {
		return nil, err
	}
	if l.running != nil {
		if err := l.takePlace(ctx); err != nil {
			return nil, err
		}
	}
	release := sync.OnceFunc(func() {
		if l.running != nil {
			<-l.running
		}
	})
	if l.rate != nil {
		now := l.now()
		r := l.rate.ReserveN(now, 1)
		if wait := r.DelayFrom(now); wait > 0 {
			r.CancelAt(now)
			release()
			return nil, &QuotaError{Tenant: l.tenant, Quota: "turnsPerMinute", Limit: l.q.TurnsPerMinute,
				RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
		}
	}
	return release, nil
}

// Waiting returns how many of the tenant's turns wait in its line now.
func (l *Limiter) Waiting() int { return len(l.line) }

// takePlace takes a place of ConcurrentTurns, waiting in the tenant's line for one if
// it has room.
func (l *Limiter) takePlace(ctx context.Context) error {
	select {
	case l.running <- struct{}{}:
		return nil
	default:
	}
	// A turn lasts seconds; a client told to come back in one finds room soon
	// enough without polling hard.
	full := &QuotaError{Tenant: l.tenant, Quota: "concurrentTurns", Limit: float64(l.q.ConcurrentTurns), RetryAfter: time.Second}
	select {
	case l.line <- struct{}{}: // never ready when nil: no line
	default:
		return full
	}
	defer func() { <-l.line }()
	select {
	case l.running <- struct{}{}:
		return nil
	case <-l.after(l.q.TurnQueueTimeout.Duration):
		return full
	case <-ctx.Done():
		return fmt.Errorf("tenant %s: waiting for a place of concurrentTurns: %w", l.tenant, context.Cause(ctx))
	}
}

// checkUsed refuses a turn when the tenant's model tokens of the day, or its stored
// bytes, are all used.
func (l *Limiter) checkUsed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit := l.q.ModelTokensPerDay; limit > 0 {
		if wait := l.tokens.wait(l.now(), limit); wait > 0 {
			return &QuotaError{Tenant: l.tenant, Quota: "modelTokensPerDay", Limit: float64(limit),
				RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
		}
	}
	if limit := l.q.StoredBytes; limit > 0 && l.stored >= limit {
		// Stored sessions do not shrink with time.
		return &QuotaError{Tenant: l.tenant, Quota: "storedBytes", Limit: float64(limit)}
	}
	return nil
}

// CountUsage counts what a model call of the tenant's used against its tokens of the
// day (deploy.WithUsage hands it each call's usage): input and output tokens, or the
// total where a model reports only that.
func (l *Limiter) CountUsage(_ context.Context, u *abi.GenerationUsage) {
	n := int64(u.InputTokens) + int64(u.OutputTokens)
	if n == 0 {
		n = int64(u.TotalTokens)
	}
	if n <= 0 || l.q.ModelTokensPerDay == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens.add(l.now(), n)
}

// SetStorage gives the limiter what measures the tenant's stored bytes (its
// deployment's StoredBytes); without it, the StoredBytes quota is not enforced.
func (l *Limiter) SetStorage(measure func(context.Context) (int64, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.measure = measure
}

// MeasureStorage measures the tenant's stored bytes, which the turns after it are
// admitted by, unless they were measured less than storageEvery ago or are being
// measured now. Call it as a turn ends, holding no lock: it reads the store.
func (l *Limiter) MeasureStorage(ctx context.Context) error {
	l.mu.Lock()
	now := l.now()
	if l.q.StoredBytes == 0 || l.measure == nil || l.measuring || (!l.measured.IsZero() && now.Sub(l.measured) < storageEvery) {
		l.mu.Unlock()
		return nil
	}
	l.measuring = true
	measure := l.measure
	l.mu.Unlock()

	n, err := measure(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.measuring = false
	if err != nil {
		return fmt.Errorf("tenant %s: measuring stored bytes: %w", l.tenant, err)
	}
	l.stored, l.measured = n, now
	return nil
}

// window counts what was used in the last day, by the minute.
type window struct {
	spans []span // oldest first
	total int64
}

// span is what was used in the minute from start.
type span struct {
	start time.Time
	n     int64
}

const day = 24 * time.Hour

func (w *window) add(now time.Time, n int64) {
	w.expire(now)
	minute := now.Truncate(time.Minute)
	if k := len(w.spans); k > 0 && w.spans[k-1].start.Equal(minute) {
		w.spans[k-1].n += n
	} else {
		w.spans = append(w.spans, span{minute, n})
	}
	w.total += n
}

// expire forgets what was used a day or more ago.
func (w *window) expire(now time.Time) {
	i := 0
	for i < len(w.spans) && !w.spans[i].start.Add(day).After(now) {
		w.total -= w.spans[i].n
		i++
	}
	w.spans = w.spans[i:]
}

// wait returns how long until less than limit is used in the window: 0 if it is now.
func (w *window) wait(now time.Time, limit int64) time.Duration {
	w.expire(now)
	used := w.total
	if used < limit {
		return 0
	}
	for _, s := range w.spans {
		if used -= s.n; used < limit {
			return s.start.Add(day).Sub(now)
		}
	}
	return 0 // not reached: with every span gone, nothing is used
}
