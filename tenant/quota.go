package tenant

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/terrarium-ai/terrarium/host"
)

// QuotaError is the error of a turn a tenant's quota refuses: which quota, and when
// trying again may succeed.
type QuotaError struct {
	Tenant     string
	Quota      string // "concurrentTurns", "concurrentSessions", "turnsPerMinute"
	Limit      float64
	RetryAfter time.Duration
}

// Error implements error.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("tenant %s: %s quota of %g reached: retry after %v", e.Tenant, e.Quota, e.Limit, e.RetryAfter)
}

// Unwrap returns ErrOverQuota.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }

// Limiter enforces a tenant's turn quotas. It refuses at once rather than queueing, so
// that a tenant over its quota waits on its own side and holds nothing of the server's,
// and a tenant within it never waits behind another. It is safe for concurrent use.
type Limiter struct {
	tenant  string
	q       Quotas
	running chan struct{} // a token per running turn; nil without the quota
	open    chan struct{} // a token per open session; nil without the quota
	rate    *rate.Limiter // nil without the quota
	plugin  *rate.Limiter // plugin time, in milliseconds; nil without the quota
	now     func() time.Time
}

// NewLimiter returns the limiter of a tenant's quotas.
func NewLimiter(t *Tenant) *Limiter {
	l := &Limiter{tenant: t.ID, q: t.Quotas, now: time.Now}
	if n := t.Quotas.ConcurrentTurns; n > 0 {
		l.running = make(chan struct{}, n)
	}
	if n := t.Quotas.ConcurrentSessions; n > 0 {
		l.open = make(chan struct{}, n)
	}
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

// StartTurn admits a turn, or refuses it with a *QuotaError; an admitted turn calls
// done when it ends. A turn refused for the rate does not count against it.
func (l *Limiter) StartTurn() (done func(), err error) {
	if l.running != nil {
		select {
		case l.running <- struct{}{}:
		default:
			// A turn lasts seconds; a client told to come back in one finds room
			// soon enough without polling hard.
			return nil, &QuotaError{Tenant: l.tenant, Quota: "concurrentTurns", Limit: float64(l.q.ConcurrentTurns), RetryAfter: time.Second}
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
