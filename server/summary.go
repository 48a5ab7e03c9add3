package server

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
)

// titleLen bounds a session's title, in characters.
const titleLen = 60

// summarize gives a listed session of a kept agent what tells it apart: when it was
// last used and its first words, from its latest snapshot. A session whose snapshot
// cannot be read is listed without them, and the reason logged: one damaged session
// does not hide the others.
func (s *Server) summarize(ctx context.Context, a *deploy.Agent, info *SessionInfo) {
	snap, err := a.LatestSnapshot(ctx, info.SessionID)
	if err != nil {
		if !errors.Is(err, session.ErrSnapshotNotFound) {
			s.log.WarnContext(ctx, "a listed session's latest snapshot could not be read", "agent", a.Name, "session", info.SessionID, "error", err)
		}
		return
	}
	info.UpdatedAt = snap.CreatedAt
	for _, m := range snap.State.Messages {
		if m.Role == abi.RoleUser && strings.TrimSpace(m.Text()) != "" {
			info.Title = firstWords(m.Text(), titleLen)
			return
		}
	}
}

// firstWords returns the words text begins with, its spaces folded, as many as fit
// in n characters; an ellipsis marks what was left out.
func firstWords(text string, n int) string {
	var b strings.Builder
	used := 0
	for _, w := range strings.Fields(text) {
		need := utf8.RuneCountInString(w)
		if used > 0 {
			need++
		}
		if used+need > n {
			if used == 0 { // one word longer than n
				return string([]rune(w)[:n]) + "…"
			}
			return b.String() + "…"
		}
		if used > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		used += need
	}
	return b.String()
}

// cmpNewest orders times newest first, the zero time (not yet known: a session whose
// first turn runs) before any.
func cmpNewest(x, y time.Time) int {
	switch {
	case x.Equal(y):
		return 0
	case x.IsZero():
		return -1
	case y.IsZero():
		return 1
	}
	return y.Compare(x)
}
