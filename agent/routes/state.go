package routes

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/terrarium-ai/terrarium/agent"
)

// State is where a conversation stands (seed 002's SessionState): the current route
// and step, the data collected by each route, and the routes visited. Respond takes one
// and returns the next; a flow (DefineFlow) keeps it as its session's custom state, so
// it lives in every snapshot. Its JSON form is stable, for storing it anywhere.
type State struct {
	// ID is the application's identifier for the conversation, if any.
	ID           string          `json:"id,omitempty"`
	CurrentRoute *RouteRef       `json:"currentRoute,omitempty"`
	CurrentStep  *StepRef        `json:"currentStep,omitempty"`
	DataByRoute  map[string]Data `json:"dataByRoute,omitempty"`
	// StepByRoute is the step each route was at when the conversation left it, so that
	// coming back resumes it there.
	StepByRoute  map[string]string `json:"stepByRoute,omitempty"`
	RouteHistory []RouteVisit      `json:"routeHistory,omitempty"`
	// NextRoute is the route the next turn enters: the one the completed route's
	// OnComplete chose.
	NextRoute string `json:"nextRoute,omitempty"`
	// Context is this conversation's own context (UpdateContext), over the agent's
	// and under a turn's RespondInput.Context, key by key.
	Context map[string]any `json:"context,omitempty"`
	// Metadata is the application's own (user, channel...), kept as it is.
	Metadata map[string]any `json:"metadata,omitempty"`
	// CreatedAt is the time of the conversation's first turn; UpdatedAt, of its last.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// RouteRef names the current route.
type RouteRef struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	EnteredAt time.Time `json:"enteredAt"`
}

// StepRef names the current step; its ID is EndRouteID once the route completed.
type StepRef struct {
	ID          string    `json:"id"`
	Description string    `json:"description,omitempty"`
	EnteredAt   time.Time `json:"enteredAt"`
}

// RouteVisit records a stay in a route.
type RouteVisit struct {
	RouteID   string     `json:"routeId"`
	EnteredAt time.Time  `json:"enteredAt"`
	ExitedAt  *time.Time `json:"exitedAt,omitempty"`
	Completed bool       `json:"completed"`
	// From is the route whose completion led here (its OnComplete), if any.
	From string `json:"from,omitempty"`
}

// NewState returns the state of a new conversation (seed 002's createSession).
func NewState(id string) *State { return &State{ID: id} }

// Data returns the data collected by the current route, or nil outside any route.
func (s *State) Data() Data {
	if s == nil || s.CurrentRoute == nil {
		return nil
	}
	return s.DataByRoute[s.CurrentRoute.ID]
}

// DataFor returns the data collected by a route, current or not: a route left for
// another keeps its data (seed 002's getData(routeId)).
func (s *State) DataFor(routeID string) Data {
	if s == nil {
		return nil
	}
	return s.DataByRoute[routeID]
}

// RouteComplete reports whether the current route reached EndRoute.
func (s *State) RouteComplete() bool {
	return s != nil && s.CurrentStep != nil && s.CurrentStep.ID == EndRouteID
}

// UpdateContext merges updates (any value that encodes to a JSON object) into the
// conversation's own context, key by key (seed 002's updateContext, per conversation):
// the next turn's templates render from it. A nil value removes its key.
func (s *State) UpdateContext(updates any) error {
	d, err := toData(updates)
	if err != nil {
		return fmt.Errorf("routes: %w: UpdateContext: %v", agent.ErrInvalidInput, err)
	}
	s.Context = mergeContext(s.Context, d)
	return nil
}

// mergeContext returns base with updates merged in, key by key, a nil value removing
// its key; base is not changed.
func mergeContext(base, updates map[string]any) map[string]any {
	if len(updates) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range updates {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// clone returns a deep copy, so a turn never changes the state it was given.
func (s *State) clone() *State {
	if s == nil {
		return &State{}
	}
	c := *s
	if s.CurrentRoute != nil {
		r := *s.CurrentRoute
		c.CurrentRoute = &r
	}
	if s.CurrentStep != nil {
		st := *s.CurrentStep
		c.CurrentStep = &st
	}
	if s.DataByRoute != nil {
		c.DataByRoute = make(map[string]Data, len(s.DataByRoute))
		for k, d := range s.DataByRoute {
			c.DataByRoute[k] = d.clone()
		}
	}
	c.StepByRoute = maps.Clone(s.StepByRoute)
	c.RouteHistory = slices.Clone(s.RouteHistory)
	for i, v := range c.RouteHistory {
		if v.ExitedAt != nil {
			t := *v.ExitedAt
			c.RouteHistory[i].ExitedAt = &t
		}
	}
	if s.Metadata != nil {
		c.Metadata = deepCopy(s.Metadata).(map[string]any)
	}
	if s.Context != nil {
		c.Context = deepCopy(s.Context).(map[string]any)
	}
	return &c
}

// enter makes rt the current route: the route left (if any) is recorded as exited,
// its step kept for a return; rt resumes its own data and step, or starts afresh with
// its initial data when it is new or completed.
func (s *State) enter(rt *Route, now time.Time) (resumed bool) {
	s.exit(now, false)
	if s.DataByRoute == nil {
		s.DataByRoute = map[string]Data{}
	}
	if s.StepByRoute == nil {
		s.StepByRoute = map[string]string{}
	}
	step, seen := s.StepByRoute[rt.id]
	resumed = seen && step != EndRouteID
	if !resumed {
		s.DataByRoute[rt.id] = rt.initialData.clone()
		delete(s.StepByRoute, rt.id)
	}
	s.CurrentRoute = &RouteRef{ID: rt.id, Title: rt.title, EnteredAt: now}
	s.CurrentStep = nil
	if resumed {
		if st := rt.Step(step); st != nil {
			s.CurrentStep = &StepRef{ID: st.id, Description: st.description, EnteredAt: now}
		}
	}
	s.RouteHistory = append(s.RouteHistory, RouteVisit{RouteID: rt.id, EnteredAt: now})
	return resumed
}

// exit leaves the current route, if any, recording whether it completed.
func (s *State) exit(now time.Time, completed bool) {
	if s.CurrentRoute == nil {
		return
	}
	s.closeVisit(now, completed)
	if s.CurrentStep != nil {
		s.StepByRoute[s.CurrentRoute.ID] = s.CurrentStep.ID
	}
	s.CurrentRoute, s.CurrentStep = nil, nil
}

// moveTo makes st the current step.
func (s *State) moveTo(st *Step, now time.Time) {
	if s.CurrentStep != nil && s.CurrentStep.ID == st.id {
		return
	}
	s.CurrentStep = &StepRef{ID: st.id, Description: st.description, EnteredAt: now}
	s.StepByRoute[s.CurrentRoute.ID] = st.id
}

// complete records that the current route reached EndRoute. The route stays current,
// its step EndRouteID, until the next turn leaves it.
func (s *State) complete(now time.Time) {
	s.CurrentStep = &StepRef{ID: EndRouteID, Description: EndRoute.description, EnteredAt: now}
	s.StepByRoute[s.CurrentRoute.ID] = EndRouteID
	s.closeVisit(now, true)
}

// closeVisit records the end of the current route's open visit.
func (s *State) closeVisit(now time.Time, completed bool) {
	for i := len(s.RouteHistory) - 1; i >= 0; i-- {
		v := &s.RouteHistory[i]
		if v.RouteID == s.CurrentRoute.ID && v.ExitedAt == nil {
			v.ExitedAt, v.Completed = &now, completed
			return
		}
	}
}
