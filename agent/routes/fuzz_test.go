package routes_test

import (
	"context"
	"testing"

	"github.com/terrarium-ai/terrarium/agent/routes"
)

// forgivingTurn runs one turn of a fresh forgiving agent both ways, its model
// answering as script says, and fails unless both ways give a message, never fail,
// collect only data the flight route's schema allows, and agree.
func forgivingTurn(t *testing.T, routesToo bool, script func(reply func(any))) {
	var results []*routes.Response
	for _, w := range ways {
		a, m, _ := newAgent(t)
		flightRoute(a)
		if routesToo {
			hotelRoute(a)
		}
		script(func(v any) { reply(m, v) })
		reply(m, "Where would you like to fly?") // a second call, if the answer needs one
		res, err := w.do(context.Background(), a, routes.RespondInput{History: userTurn("I want to fly"), Session: routes.NewState("s")})
		if err != nil {
			t.Fatalf("%s: the turn failed: %v", w.name, err)
		}
		if res.Message == "" && !res.RouteComplete {
			t.Fatalf("%s: no message", w.name)
		}
		for _, d := range res.Session.DataByRoute {
			if _, err := routes.DataAs[Flight](d); err != nil {
				if _, err := routes.DataAs[Hotel](d); err != nil {
					t.Fatalf("%s: data %v fits no route", w.name, d)
				}
			}
			if p, ok := d["passengers"].(float64); ok && (p < 1 || p > 9 || p != float64(int(p))) {
				t.Fatalf("%s: passengers %v, outside the schema", w.name, p)
			}
		}
		results = append(results, res)
	}
	sameResults(t, results[:1], results[1:])
}

// FuzzForgivingAnswer: whatever text a model answers with, a forgiving turn gives a
// message, does not fail, and keeps only data the route's schema allows.
func FuzzForgivingAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"message": "Where to?", "destination": "Paris"}`,
		"Sure!\n```json\n{\"message\": \"Paris it is.\", \"destination\": \"Paris\", \"passengers\": \"2\"}\n```\nAnything else?",
		`Paris, noted! {"destination": "Paris", "passengers": 12}`,
		`{"message": "", "destination": ["Paris"], "departureDate": null, "extra": {"a": 1}}`,
		`{"message": {"text": "hi"}, "passengers": 2.5}`,
		"plain prose, no JSON at all",
		`{"message": "cut short`,
		`null`, `[1, 2]`, ``, `{}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		forgivingTurn(t, false, func(reply func(any)) { reply(answer) })
	})
}

// FuzzForgivingRouting: whatever text the routing call answers with, a forgiving turn
// goes on to its answer.
func FuzzForgivingRouting(f *testing.F) {
	for _, seed := range []string{
		`{"routes": {"flight": 90, "hotel": 10}, "data": {"flight": {"destination": "Oslo"}}}`,
		`{"routes": {"flight": "90", "hotel": [1]}, "step": 3, "data": {"flight": "Oslo", "hotel": {"nights": "two"}}}`,
		`{"routes": "flight", "data": [1]}`,
		"The user wants a flight.",
		"```json\n{\"routes\": {\"flight\": 95}}\n```",
		`{"routes": {"flight": 1e400}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, routing string) {
		forgivingTurn(t, true, func(reply func(any)) {
			reply(routing)
			reply(map[string]any{"message": "Where to?"})
		})
	})
}
