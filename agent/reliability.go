package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
)

// Reliability makes model calls survive a flaky provider: seed 002's retryConfig
// (timeout, retries) and backupModels. Attach it to an agent or a call with
// WithMiddleware(Reliable(r, rel)), or to one model wherever it is used with
// Registry.UseModelMiddleware.
type Reliability struct {
	// Timeout bounds each attempt (default 60 s; negative: none).
	Timeout time.Duration
	// Retries is how many times a failed attempt is retried on the same model, when
	// its error is transient (default 3; negative: none).
	Retries int
	// Backoff is the delay before the first retry, doubled for each next one up to
	// MaxBackoff (defaults 500 ms and 10 s), with 20% jitter. A provider's Retry-After
	// is honoured instead when it is longer, up to MaxRetryAfter (default 60 s); past
	// that the call fails at once rather than wait.
	Backoff, MaxBackoff, MaxRetryAfter time.Duration
	// Backups are the models (registered names) tried in order, each with the same
	// retries, when the model still fails.
	Backups []string
	// Transient decides whether an error is worth retrying on the same model; the
	// default is Transient.
	Transient func(error) bool
}

func (r Reliability) withDefaults() Reliability {
	if r.Timeout == 0 {
		r.Timeout = 60 * time.Second
	}
	if r.Retries == 0 {
		r.Retries = 3
	}
	if r.Retries < 0 {
		r.Retries = 0
	}
	if r.Backoff == 0 {
		r.Backoff = 500 * time.Millisecond
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = 10 * time.Second
	}
	if r.MaxRetryAfter == 0 {
		r.MaxRetryAfter = 60 * time.Second
	}
	if r.Transient == nil {
		r.Transient = Transient
	}
	return r
}

// errAttemptTimeout marks an attempt that ran out of its Reliability.Timeout.
var errAttemptTimeout = errors.New("model call timed out")

// Transient reports whether an error is worth retrying: a timed-out attempt, an
// unavailable provider, or an HTTP status of 408, 409, 425, 429 or 5xx, unless the
// provider's error says permission is denied (a 429 for an exhausted quota).
func Transient(err error) bool {
	if errors.Is(err, errAttemptTimeout) {
		return true
	}
	var e *abi.Error
	if !errors.As(err, &e) {
		return false
	}
	switch {
	case e.Code == abi.CodePermissionDenied:
		// Waiting does not help (a 429 for an exhausted quota, say).
		return false
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusConflict, e.Status == http.StatusTooEarly,
		e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	case e.Status == 0 && e.Code == abi.CodeUnavailable:
		return true
	}
	return false
}

// retryAfter returns the delay a provider asked for, if any.
func retryAfter(err error) time.Duration {
	var e *abi.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return time.Duration(e.RetryAfter * float64(time.Second))
	}
	return 0
}

// Reliable returns model middleware applying rel: a timeout per attempt, retries with
// backoff on transient errors, then the backup models in order. Nothing is retried
// once a chunk has been streamed to the caller (it would be streamed twice), nor
// after the caller's own context ends.
func Reliable(r *Registry, rel Reliability) Middleware {
	rel = rel.withDefaults()
	return Middleware{Model: func(m Model, next ModelFunc) ModelFunc {
		return func(ctx context.Context, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, error) {
			var errs []error
			models := append([]string{m.Name()}, rel.Backups...)
			for i, name := range models {
				call := next
				if i > 0 {
					backup, err := r.LookupModel(name)
					if err != nil {
						errs = append(errs, fmt.Errorf("backup %w", err))
						continue
					}
					call = generateWith(backup)
				}
				resp, streamed, err := rel.attempts(ctx, name, call, req, cb)
				if err == nil {
					return resp, nil
				}
				errs = append(errs, err)
				if streamed || ctx.Err() != nil {
					break
				}
			}
			if len(errs) == 1 {
				return nil, errs[0]
			}
			return nil, fmt.Errorf("agent: every model failed: %w", errors.Join(errs...))
		}
	}}
}

// attempts calls one model until it succeeds, its error is not transient, or the
// retries are spent. It reports whether anything was streamed.
func (rel Reliability) attempts(ctx context.Context, name string, call ModelFunc, req *abi.GenerateRequest, cb ModelStreamCallback) (*abi.GenerateResponse, bool, error) {
	streamed := false
	var wrapped ModelStreamCallback
	if cb != nil {
		wrapped = func(ctx context.Context, c *abi.GenerateResponseChunk) error {
			streamed = true
			return cb(ctx, c)
		}
	}
	delay := rel.Backoff
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if rel.Timeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, rel.Timeout, errAttemptTimeout)
		}
		resp, err := call(actx, req, wrapped)
		if err != nil && errors.Is(context.Cause(actx), errAttemptTimeout) && ctx.Err() == nil {
			err = fmt.Errorf("model %s: %w after %v: %w", name, errAttemptTimeout, rel.Timeout, err)
		}
		cancel()
		if err == nil {
			return resp, streamed, nil
		}
		if streamed || ctx.Err() != nil || attempt >= rel.Retries || !rel.Transient(err) {
			return nil, streamed, fmt.Errorf("model %s, attempt %d: %w", name, attempt+1, err)
		}
		wait := delay + time.Duration(rand.Int64N(int64(delay)/5+1))
		if ra := retryAfter(err); ra > 0 {
			if ra > rel.MaxRetryAfter {
				return nil, streamed, fmt.Errorf("model %s, attempt %d: the provider asks to wait %v, longer than %v: %w", name, attempt+1, ra, rel.MaxRetryAfter, err)
			}
			wait = max(wait, ra)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, streamed, fmt.Errorf("model %s, attempt %d: %w", name, attempt+1, err)
		}
		delay = min(delay*2, rel.MaxBackoff)
	}
}
