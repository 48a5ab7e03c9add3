package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/deploy"
)

// flightFile is a routed agent with one route whose steps collect a destination and
// a number of passengers.
const flightFile = `name: flights
description: Books flights.
model: {name: test/form}
identity: I am Skye.
guidelines:
  - action: Be brief.
terms:
  - name: PNR
    description: The booking's reference.
routes:
  - id: flight
    title: Book a flight
    conditions: [The traveller wants to fly]
    schema:
      type: object
      properties:
        destination: {type: string}
        passengers: {type: integer, minimum: 1}
    steps:
      - id: ask_destination
        prompt: Ask the destination
        collect: [destination]
        skipIf: destination != nil
      - id: ask_passengers
        prompt: Ask the number of passengers
        collect: [passengers]
snapshots: {store: memory}
`

var (
	assignment = regexp.MustCompile(`(\w+)=(\w+)`)
	doNow      = regexp.MustCompile(`Do now: (.*)`)
)

// formRegistry defines test/form, a model for routed agents: it answers with the
// fields its output schema asks for that the user's last message gives as name=value
// (a routing call: every route's), the step's instruction as the message, and a score
// of 90 for each route whose ID the user names.
func formRegistry() *agent.Registry {
	r := agent.NewRegistry()
	agent.DefineModel(r, "test/form", nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		said := ""
		for _, m := range abi.WithoutInjected(req.Messages) {
			if m.Role == abi.RoleUser {
				said = m.Text()
			}
		}
		given := map[string]any{}
		for _, m := range assignment.FindAllStringSubmatch(said, -1) {
			given[m[1]] = m[2]
			if n, err := strconv.Atoi(m[2]); err == nil {
				given[m[1]] = n
			}
		}
		fields := func(schema any) map[string]any {
			props, _ := schema.(map[string]any)["properties"].(map[string]any)
			out := map[string]any{}
			for name := range props {
				if v, ok := given[name]; ok {
					out[name] = v
				}
			}
			return out
		}
		var out map[string]any
		props, _ := req.Output.Schema["properties"].(map[string]any)
		if routing, ok := props["routes"].(map[string]any); ok {
			scores, data := map[string]any{}, map[string]any{}
			for id := range routing["properties"].(map[string]any) {
				scores[id] = 10
				if strings.Contains(said, id) {
					scores[id] = 90
				}
			}
			extract, _ := props["data"].(map[string]any)
			byRoute, _ := extract["properties"].(map[string]any)
			for id, schema := range byRoute {
				data[id] = fields(schema)
			}
			out = map[string]any{"routes": scores, "data": data}
		} else {
			out = fields(req.Output.Schema)
			out["message"] = "How can I help?"
			if m := doNow.FindStringSubmatch(req.Messages[0].Text()); m != nil {
				out["message"] = m[1]
			}
		}
		text, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage(string(text)), FinishReason: abi.FinishStop}, nil
	})
	return r
}

// routedTurn sends one input and returns the turn's text, its status and the error
// that refused it, if any.
func routedTurn(t *testing.T, conn session.AnyConnection, text string) (string, routes.Status, error) {
	t.Helper()
	if err := conn.Send(say(text)); err != nil {
		t.Fatal(err)
	}
	var answer strings.Builder
	var status routes.Status
	var refused error
	for c, err := range conn.Receive() {
		if c == nil {
			t.Fatal(err)
		}
		if err != nil {
			refused = err
		}
		if c.Chunk != nil {
			answer.WriteString(c.Chunk.Text())
		}
		if c.Status != nil {
			if err := json.Unmarshal(c.Status, &status); err != nil {
				t.Fatal(err)
			}
		}
	}
	return answer.String(), status, refused
}

func TestRoutedAgentFile(t *testing.T) {
	f, err := deploy.Parse("agents/flights.yaml", []byte(flightFile))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Routed() || f.Name != "flights" || f.Identity != "I am Skye." || len(f.Routes) != 1 || f.Routes[0].Steps[1].ID != "ask_passengers" {
		t.Errorf("parsed %+v", f.Definition)
	}
	if f.Line("routes[0].steps[1].collect") != 26 || f.Line("terms[0].name") != 8 {
		t.Errorf("lines: collect %d, term %d", f.Line("routes[0].steps[1].collect"), f.Line("terms[0].name"))
	}
	prompted, err := deploy.Parse("a.yaml", []byte("name: a\nmodel: {name: x}\ndescription: d\n"))
	if err != nil || prompted.Routed() {
		t.Errorf("a file without routed keys is routed: %v, %v", prompted.Routed(), err)
	}
}

func TestRoutedAgentFileErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"routes and a prompt", "name: a\nmodel: {name: x}\nprompt: Hello\nroutes:\n  - title: T\n",
			"a.yaml:3: prompt: a routed agent (it has routes, line 4) has no prompt"},
		{"guidelines and tools", "name: a\nmodel: {name: x}\nguidelines: [{action: Be brief.}]\ntools: [t]\n",
			"a.yaml:4: tools: a routed agent (it has guidelines, line 3) has no tools"},
		{"identity and handlers", "name: a\nmodel: {name: x}\nhandlers: [h]\nidentity: I am a.\n",
			"a.yaml:3: handlers: a routed agent (it has identity, line 4) has no handlers"},
		{"identity and client tools", "name: a\nmodel: {name: x}\nclientTools: true\nidentity: I am a.\n",
			"a.yaml:3: clientTools: a routed agent (it has identity, line 4) has no clientTools"},
		{"no model", "name: a\nroutes:\n  - title: T\n", "a.yaml: model.name: missing: a routed agent's model is named here"},
		{"unknown key in a step", "name: a\nmodel: {name: x}\nroutes:\n  - title: T\n    steps:\n      - prompt: p\n        colect: [x]\n",
			`a.yaml:7: routes[0].steps[0].colect: unknown field "colect"`},
		{"wrong type in a route", "name: a\nmodel: {name: x}\nroutes:\n  - title: T\n    conditions: many\n",
			"a.yaml:5: routes[0].conditions: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deploy.Parse("a.yaml", []byte(tc.src))
			if !errors.Is(err, deploy.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want one starting with %q", err, tc.want)
			}
		})
	}
}

func TestRoutedAgentDefinitionErrorsNameFileLineAndField(t *testing.T) {
	route := "name: a\nmodel: {name: test/form}\nsnapshots: {store: none}\nroutes:\n  - title: T\n    schema: {type: object, properties: {x: {type: string}}}\n    steps:\n"
	for _, tc := range []struct {
		name, src, want string
		is              error
	}{
		{"unknown step in a transition", route + "      - id: s\n        next:\n          - step: nowhere\n",
			`a.yaml:10: routes[0].steps[0].next[0].step: routes: invalid definition: route "T": step "s": transition to unknown step "nowhere"`, routes.ErrInvalidDefinition},
		{"collect missing from the schema", route + "      - prompt: p\n        collect: [y]\n",
			`a.yaml:9: routes[0].steps[0].collect: `, routes.ErrInvalidDefinition},
		{"bad skipIf", route + "      - prompt: p\n        skipIf: xx != nil\n",
			`a.yaml:9: routes[0].steps[0].skipIf: `, routes.ErrInvalidDefinition},
		{"skipIf not a condition", route + "      - prompt: p\n        skipIf: x + 1\n",
			`a.yaml:9: routes[0].steps[0].skipIf: `, routes.ErrInvalidDefinition},
		{"unknown composition", "name: a\nmodel: {name: test/form}\nsnapshots: {store: none}\ncomposition: poetic\n",
			`a.yaml:4: composition: `, agent.ErrInvalidOption},
		{"unknown tool", route + "      - prompt: p\n        tool: nosuch\n",
			`a.yaml:9: routes[0].steps[0].tool: no tool named "nosuch" is registered`, deploy.ErrInvalid},
		{"unknown tool in a domain", "name: a\nmodel: {name: test/form}\nsnapshots: {store: none}\ndomains:\n  pay: [charge]\n",
			`a.yaml:5: domains.pay[0]: no tool named "charge" is registered`, deploy.ErrInvalid},
		{"askUser", route + "      - prompt: p\n        guidelines:\n          - action: Ask.\n            tools: [askUser]\n",
			`a.yaml:11: routes[0].steps[0].guidelines[0].tools[0]: askUser waits for the user's answer, which a routed agent's turn cannot`, deploy.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := deploy.Parse("a.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			r := formRegistry()
			before := len(r.Actions())
			_, err = deploy.New(t.Context(), []*deploy.File{f}, deploy.WithRegistry(r), quiet)
			if !errors.Is(err, deploy.ErrInvalid) || !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant one starting with\n%s", err, tc.want)
			}
			if left := len(r.Actions()); left != before {
				t.Errorf("a failed deployment left %d actions in the registry", left-before)
			}
		})
	}
}

// deployed deploys one agent file over formRegistry's model and returns its agent, the
// deployment closed when the test ends.
func deployed(t *testing.T, src string) *deploy.Agent {
	t.Helper()
	f, err := deploy.Parse("agent.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithRegistry(formRegistry()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	a, err := d.Agent(f.Name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRoutedAgentConversesAndKeepsItsRouteInSnapshots(t *testing.T) {
	a := deployed(t, flightFile)
	if strings.Join(a.Routes, ",") != "flight" || a.Model != "test/form" || !a.ServerManaged() {
		t.Errorf("agent %+v", a)
	}
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	answer, _, err := routedTurn(t, conn, "I want to fly, destination=Lisbon")
	if err != nil || answer != "Ask the destination" {
		t.Fatalf("first turn: %q, %v", answer, err)
	}
	// Data the route's schema refuses is dropped, with a warning in the turn's status,
	// and the conversation goes on.
	if answer, status, err := routedTurn(t, conn, "passengers=0"); err != nil || answer != "Ask the number of passengers" ||
		len(status.Warnings) != 1 || status.Warnings[0].Code != routes.WarnInvalidField || status.Warnings[0].Field != "passengers" {
		t.Errorf("passengers=0: %q, status %+v, %v; want a warning about passengers", answer, status, err)
	}
	for _, step := range []struct {
		say, answer string
		status      routes.Status
	}{
		{"passengers=2", "Ask the number of passengers", routes.Status{Route: "flight", Step: "ask_passengers"}},
		{"that is all", "", routes.Status{Route: "flight", Step: routes.EndRouteID, RouteComplete: true}},
	} {
		answer, status, err := routedTurn(t, conn, step.say)
		if err != nil || answer != step.answer || status.Route != step.status.Route || status.Step != step.status.Step || status.RouteComplete != step.status.RouteComplete {
			t.Errorf("%q: answer %q, status %+v, error %v; want %q, %+v", step.say, answer, status, err, step.answer, step.status)
		}
	}
	conn.Close()
	if _, err := conn.Output(); err != nil {
		t.Fatal(err)
	}

	snaps, err := a.Snapshots(t.Context(), conn.SessionID())
	if err != nil || len(snaps) < 3 {
		t.Fatalf("snapshots: %d, %v", len(snaps), err)
	}
	latest, err := a.LatestSnapshot(t.Context(), conn.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	var st routes.State
	if err := json.Unmarshal(latest.State.Custom, &st); err != nil {
		t.Fatal(err)
	}
	if data := st.DataFor("flight"); data["destination"] != "Lisbon" || data["passengers"] != float64(2) || !st.RouteComplete() {
		t.Errorf("the latest snapshot's route state: %+v", st)
	}
	if got, err := a.Snapshot(t.Context(), snaps[0].SnapshotID); err != nil || got.SnapshotID != snaps[0].SnapshotID || got.TurnIndex != 0 {
		t.Errorf("Snapshot(%s) = %+v, %v", snaps[0].SnapshotID, got, err)
	}

	// Resuming the first turn's snapshot branches the conversation at ask_destination.
	init, _ := json.Marshal(map[string]string{"snapshotId": snaps[0].SnapshotID})
	conn, err = a.Flow().ConnectAny(t.Context(), init)
	if err != nil {
		t.Fatal(err)
	}
	if _, status, err := routedTurn(t, conn, "passengers=3"); err != nil || status.Step != "ask_passengers" {
		t.Errorf("after resuming: status %+v, %v", status, err)
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	st = routes.State{}
	branch, err := a.Snapshot(t.Context(), out.SnapshotID)
	if err != nil || out.State != nil {
		t.Fatalf("the branch's snapshot: %v; the output carries state %v", err, out.State)
	}
	if err := json.Unmarshal(branch.State.Custom, &st); err != nil || st.DataFor("flight")["passengers"] != float64(3) {
		t.Errorf("the branch's state: %+v, %v", st, err)
	}
	// Looking the session up after the branch finds the branch: the snapshot a turn by
	// the session's ID continues.
	if latest, err := a.LatestSnapshot(t.Context(), conn.SessionID()); err != nil || latest.SnapshotID != out.SnapshotID {
		t.Errorf("the session's latest snapshot after a branch: %v, %v; want %s", latest, err, out.SnapshotID)
	}

	if prev, ok, err := a.Abort(t.Context(), snaps[0].SnapshotID); err != nil || !ok || prev != session.StatusCompleted {
		t.Errorf("Abort of a completed snapshot: %q, %v, %v; want its status", prev, ok, err)
	}
	if _, err := a.Snapshot(t.Context(), "nope"); !errors.Is(err, session.ErrSnapshotNotFound) {
		t.Errorf("Snapshot(nope): %v, want ErrSnapshotNotFound", err)
	}
}

// An agent file's strict and missingVariables keys make the agent refuse what a
// model or a context gets wrong.
func TestStrictRoutedAgentFile(t *testing.T) {
	a := deployed(t, flightFile+"strict: true\nmissingVariables: error\n")
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := routedTurn(t, conn, "I want to fly, destination=Lisbon"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := routedTurn(t, conn, "passengers=0"); !errors.Is(err, routes.ErrInvalidData) {
		t.Errorf("passengers=0: %v, want ErrInvalidData", err)
	}
	// An identity naming a variable the context lacks fails the turn, naming it.
	b := deployed(t, strings.Replace(flightFile, "identity: I am Skye.", "identity: I am {{agentName}}.\nmissingVariables: error", 1))
	conn, err = b.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := routedTurn(t, conn, "hello"); !errors.Is(err, routes.ErrMissingVariable) || !strings.Contains(err.Error(), "{{agentName}}") {
		t.Errorf("a missing variable: %v, want ErrMissingVariable", err)
	}

	bad, err := deploy.Parse("flights.yaml", []byte(flightFile+"missingVariables: sometimes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.New(t.Context(), []*deploy.File{bad}, deploy.WithRegistry(formRegistry()), quiet); err == nil || !strings.Contains(err.Error(), "flights.yaml:") || !strings.Contains(err.Error(), "missingVariables") {
		t.Errorf("an unknown missingVariables: %v", err)
	}
}

func TestAgentWithoutSnapshotsHasNone(t *testing.T) {
	f, err := deploy.Parse("a.yaml", []byte("name: a\nmodel: {name: test/form}\nsnapshots: {store: none}\nroutes:\n  - title: T\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(t.Context(), []*deploy.File{f}, deploy.WithRegistry(formRegistry()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	a, _ := d.Agent("a")
	if a.ServerManaged() {
		t.Error("an agent with store: none keeps sessions")
	}
	for name, call := range map[string]func() error{
		"Snapshot":       func() error { _, err := a.Snapshot(t.Context(), "s"); return err },
		"Snapshots":      func() error { _, err := a.Snapshots(t.Context(), "s"); return err },
		"LatestSnapshot": func() error { _, err := a.LatestSnapshot(t.Context(), "s"); return err },
		"Abort":          func() error { _, _, err := a.Abort(t.Context(), "s"); return err },
	} {
		if err := call(); !errors.Is(err, session.ErrNoSnapshotStore) {
			t.Errorf("%s: %v, want ErrNoSnapshotStore", name, err)
		}
	}
}

// TestTravelExample runs the example's routed agent file, its model a plugin built
// from the example, through the conversation of the Go example.
func TestTravelExample(t *testing.T) {
	files, err := deploy.ReadDir("../examples/travel")
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(t.Context(), files, deploy.WithDataDir(t.TempDir()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	a, err := d.Agent("travel")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Routes, ",") != "flight,hotel" || strings.Join(a.Plugins, ",") != "travel" {
		t.Errorf("agent %+v", a)
	}
	conn, err := a.Flow().ConnectAny(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, turn := range []struct{ say, answer, route, step string }{
		{"I'd like to fly to Lisbon", "Noted. Now tell me the day of departure.", "flight", "ask_date"},
		{"Actually, I changed my mind: find me a hotel in Porto instead", "Noted. Now tell me the number of nights.", "hotel", "ask_nights"},
		{"3 nights", "", "hotel", routes.EndRouteID},
		{"Now back to my flight", "Noted. Now tell me the day of departure.", "flight", "ask_date"},
		{"On 2025-07-14", "Noted. Now tell me the number of passengers.", "flight", "ask_passengers"},
		{"2 passengers", "", "flight", routes.EndRouteID},
	} {
		answer, status, err := routedTurn(t, conn, turn.say)
		if err != nil || answer != turn.answer || status.Route != turn.route || status.Step != turn.step {
			t.Errorf("%q: %q %+v %v; want %q at %s/%s", turn.say, answer, status, err, turn.answer, turn.route, turn.step)
		}
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		t.Fatal(err)
	}
	last, err := a.Snapshot(t.Context(), out.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	var st routes.State
	if err := json.Unmarshal(last.State.Custom, &st); err != nil {
		t.Fatal(err)
	}
	flight, hotel := st.DataFor("flight"), st.DataFor("hotel")
	if flight["destination"] != "Lisbon" || flight["departureDate"] != "2025-07-14" || flight["passengers"] != float64(2) || hotel["city"] != "Porto" || hotel["nights"] != float64(3) {
		t.Errorf("booked %v and %v", flight, hotel)
	}
}

// TestServingGuideRoutedAgentParses keeps the routed agent file docs/serving.md shows
// true to the format: every key it writes is one the decoder knows.
func TestServingGuideRoutedAgentParses(t *testing.T) {
	guide, err := os.ReadFile("../docs/serving.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\n# examples/travel/travel.yaml, shortened\n"
	_, rest, ok := strings.Cut(string(guide), start)
	src, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("docs/serving.md has no block starting %q", start)
	}
	f, err := deploy.Parse("docs/serving.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Routed() || len(f.Routes) != 1 || len(f.Routes[0].Steps) != 3 {
		t.Errorf("parsed %+v", f.Definition)
	}
}
