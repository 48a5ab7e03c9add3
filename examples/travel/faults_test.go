package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/examples/travel/rules"
)

// The faults real models commit in structured answers.
const (
	blankFields  = "blank fields"
	prose        = "prose instead of JSON"
	extraFields  = "extra fields"
	wrongType    = "a field of the wrong type"
	fencedJSON   = "JSON in a code fence amid commentary"
	faultsPerRun = 5 // one structured answer in faultsPerRun is faulty
)

var faultKinds = []string{blankFields, prose, extraFields, wrongType, fencedJSON}

// faultyModel is the rules model committing, on one structured answer in five, one
// of the faults, chosen by a seeded generator so that a run is the same every time.
type faultyModel struct {
	rng       *rand.Rand
	committed map[string]int
}

func (f *faultyModel) answer(req *abi.GenerateRequest) string {
	text := rules.Answer(req)
	var out map[string]any
	if req.Output == nil || json.Unmarshal([]byte(text), &out) != nil || f.rng.IntN(faultsPerRun) != 0 {
		return text
	}
	kind := faultKinds[f.rng.IntN(len(faultKinds))]
	f.committed[kind]++
	switch kind {
	case blankFields:
		eachField(out, func(map[string]any, string, any) any { return "" })
	case prose:
		if msg, ok := out["message"].(string); ok {
			return msg
		}
		return "The traveller wants to keep going with their trip, I believe."
	case extraFields:
		out["reasoning"] = "The traveller answered the question."
		out["confidence"] = 0.9
		eachField(out, func(fields map[string]any, _ string, v any) any {
			fields["seat"] = "window" // a field no route defines
			return v
		})
	case wrongType:
		eachField(out, func(_ map[string]any, _ string, v any) any {
			if s, ok := v.(string); ok {
				return []any{s}
			}
			b, _ := json.Marshal(v)
			return string(b)
		})
		if scores, ok := out["routes"].(map[string]any); ok {
			for id, s := range scores {
				scores[id] = []any{s}
			}
		}
	case fencedJSON:
		b, _ := json.MarshalIndent(out, "", "  ")
		return "Sure! Here is my answer:\n```json\n" + string(b) + "\n```\nLet me know if anything is unclear."
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// eachField replaces each data field of an answer (a routing answer's, by route, or
// an answer's own, its message aside) with what fn returns.
func eachField(out map[string]any, fn func(fields map[string]any, name string, v any) any) {
	apply := func(fields map[string]any, skip ...string) {
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range fields {
				if !slices.Contains(skip, k) && !yield(k) {
					return
				}
			}
		}) {
			fields[name] = fn(fields, name, fields[name])
		}
	}
	if data, ok := out["data"].(map[string]any); ok {
		for _, id := range []string{"flight", "hotel"} {
			if fields, ok := data[id].(map[string]any); ok {
				apply(fields)
			}
		}
		return
	}
	apply(out, "message", "routes", "step")
}

// traveller is the user of the run: they want a flight to Lisbon on 2025-07-14 for two
// and, first, a hotel in Porto for three nights; they change their mind as the example
// does, and answer what Skye asks, again when asked again.
type traveller struct {
	phase int // 0: asks for the flight; 1: wants the hotel; 2: the flight again; 3: done
}

var asked = regexp.MustCompile(`Now tell me (.*)\.`)

var answers = map[string]string{
	"the destination":          "I want to go to Lisbon",
	"the day of departure":     "On 2025-07-14",
	"the number of passengers": "2 passengers",
	"the city":                 "Staying in Porto",
	"the number of nights":     "3 nights",
}

// next says what the traveller says, given where the conversation stands and what
// Skye said last.
func (u *traveller) next(st *routes.State, said string) string {
	route := ""
	if st.CurrentRoute != nil && !st.RouteComplete() {
		route = st.CurrentRoute.ID
	}
	switch u.phase {
	case 0:
		u.phase = 1
		return "I'd like to fly to Lisbon"
	case 1:
		if route != "hotel" {
			return "Actually, I changed my mind: find me a hotel in Porto instead"
		}
	case 2:
		if route != "flight" {
			return "Now back to my flight"
		}
	}
	if m := asked.FindStringSubmatch(said); m != nil && answers[m[1]] != "" {
		return answers[m[1]]
	}
	return map[string]string{"hotel": "A hotel room in Porto, please", "flight": "I want to fly to Lisbon"}[route]
}

// The travel example's routes against a model that, on one structured answer in
// five, commits one of the faults of real models, over enough trips for every fault to
// strike many times: every turn gives the traveller a message (or completes a route,
// when the application speaks), no turn fails, and the data collected at the end of
// each trip is what the traveller stated.
func TestTravelSurvivesAFaultyModel(t *testing.T) {
	const trips = 30
	f := &faultyModel{rng: rand.New(rand.NewPCG(32, 2)), committed: map[string]int{}}
	r := agent.NewRegistry()
	testmodel.Define(r, "demo/faulty", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		return testmodel.Turn{Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(f.answer(req)), FinishReason: abi.FinishStop}}
	}))
	a := travelAgent(r, "demo/faulty")
	warnings := map[routes.WarningCode]int{}
	for trip := range trips {
		state := trip1(t, a, warnings)
		flight, _ := routes.DataAs[Flight](state.DataFor("flight"))
		hotel, _ := routes.DataAs[Hotel](state.DataFor("hotel"))
		if want := (Flight{Destination: "Lisbon", DepartureDate: "2025-07-14", Passengers: 2}); flight != want || len(state.DataFor("flight")) != 3 {
			t.Errorf("trip %d: flight %v, want %+v", trip, state.DataFor("flight"), want)
		}
		if want := (Hotel{City: "Porto", Nights: 3}); hotel != want || len(state.DataFor("hotel")) != 2 {
			t.Errorf("trip %d: hotel %v, want %+v", trip, state.DataFor("hotel"), want)
		}
	}
	// The run proves something only if the model did go wrong, every way.
	for _, kind := range faultKinds {
		if f.committed[kind] < 3 {
			t.Errorf("the model committed %q %d times: too few to prove anything", kind, f.committed[kind])
		}
	}
	if warnings[routes.WarnInvalidField] == 0 || warnings[routes.WarnNoJSON] == 0 || warnings[routes.WarnRouting] == 0 {
		t.Errorf("warnings %v: faults went unreported", warnings)
	}
	t.Logf("%d trips, faults %v, warnings %v", trips, f.committed, warnings)
}

// trip1 runs one trip to its end, both routes booked, and returns its state; the
// turns' warnings are counted in warnings.
func trip1(t *testing.T, a *routes.Agent, warnings map[routes.WarningCode]int) *routes.State {
	t.Helper()
	var (
		history []*abi.Message
		state   = routes.NewState("trip")
		user    traveller
		said    string
		log     []string
	)
	for turn := 1; user.phase < 3; turn++ {
		if turn > 40 {
			t.Fatalf("no booking after 40 turns:\n%s", strings.Join(log, "\n"))
		}
		text := user.next(state, said)
		history = append(history, abi.NewUserTextMessage(text))
		var res *routes.StreamChunk
		for chunk, err := range a.RespondStream(context.Background(), routes.RespondInput{History: history, Session: state}) {
			if err != nil {
				t.Fatalf("turn %d (%q) failed: %v\n%s", turn, text, err, strings.Join(log, "\n"))
			}
			if chunk.Done {
				res = chunk
			}
		}
		log = append(log, fmt.Sprintf("traveller: %s\n  skye: %s\n  [%v, warnings %v]", text, res.Accumulated, res.Session.Data(), res.Warnings))
		if res.Accumulated == "" && !res.RouteComplete {
			t.Errorf("turn %d (%q): no message\n%s", turn, text, strings.Join(log, "\n"))
		}
		for _, w := range res.Warnings {
			warnings[w.Code]++
		}
		state, said = res.Session, res.Accumulated
		if said != "" {
			history = append(history, abi.NewModelTextMessage(said))
		}
		if res.RouteComplete {
			user.phase++ // the hotel, then the flight, booked
		}
	}
	return state
}
