package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terrarium-ai/terrarium/store"
)

// Backoff between attempts: doubling from retryBase up to retryMax, each wait drawn
// from its upper half so that clients cut off together do not return together.
const (
	retryBase = 20 * time.Millisecond
	retryMax  = time.Second
)

// retry runs op until it succeeds, fails in a way another attempt cannot fix, or the
// retry period is over. Every operation of the store is safe to run again: reads
// change nothing, and a commit starts by looking for its record (see commitTx), so the
// attempt after one whose outcome is unknown finds what that one did.
func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error) error {
	var start time.Time
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if attempt == 1 {
			start = time.Now()
		}
		wait := min(retryBase<<min(attempt-1, 16), retryMax)
		wait = wait/2 + rand.N(wait/2+1)
		if elapsed := time.Since(start); elapsed+wait > s.retryPeriod {
			if attempt == 1 {
				return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
			}
			return fmt.Errorf("%w (%d attempts in %v): %w", store.ErrUnavailable, attempt, elapsed.Round(time.Millisecond), err)
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		s.logger.Log(ctx, level, "pgstore: retrying", "op", what, "attempt", attempt, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w, while retrying after: %w", ctx.Err(), err)
		case <-s.done:
			t.Stop()
			return fmt.Errorf("%w, while retrying after: %w", store.ErrClosed, err)
		}
	}
}

// transient tells whether another attempt may succeed where err failed: the
// connection broke or could not be made, the server is shutting down or starting up,
// or the transaction lost a race to another one.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"23505", // unique_violation: a concurrent commit of the same record won
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now: starting up or shutting down
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}
