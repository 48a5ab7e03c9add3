package routes_test

import (
	"context"
	"fmt"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
)

// A route collects its data step by step; a step whose data is known already is
// skipped, so data known in advance completes the route at once, without a model call.
func ExampleAgent_Respond() {
	r := agent.NewRegistry()
	// A scripted stand-in for a real model: the answer, with the field it collected.
	model := testmodel.Define(r, "demo/scripted").ReplyText(`{"message": "Nice to meet you, Ann! What's your email?", "name": "Ann"}`)
	a := routes.New(r, "Onboarding bot", routes.WithGenerateOpts(agent.WithModelName("demo/scripted")))
	type Profile struct {
		Name  string `json:"name,omitempty"`
		Email string `json:"email,omitempty"`
	}
	onboarding := a.CreateRoute(routes.RouteOptions{ID: "onboarding", Title: "User Onboarding", Schema: routes.SchemaFor[Profile]()})
	onboarding.InitialStep().
		NextStep(routes.StepSpec{ID: "ask_name", Prompt: "Ask for their name", Collect: []string{"name"}}).
		NextStep(routes.StepSpec{ID: "ask_email", Prompt: "Ask for their email", Collect: []string{"email"}}).
		NextStep(routes.StepSpec{Step: routes.EndRoute})

	ctx := context.Background()
	res, err := a.Respond(ctx, routes.RespondInput{History: []*abi.Message{abi.NewUserTextMessage("Hi, I'm Ann")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Message)
	fmt.Println(res.Session.CurrentStep.ID, res.Session.Data())

	// Another user's profile is known: the route completes on entry.
	known := &routes.State{DataByRoute: map[string]routes.Data{}}
	known.DataByRoute["onboarding"] = routes.Data{"name": "Bo", "email": "bo@example.com"}
	known.StepByRoute = map[string]string{"onboarding": "ask_name"}
	known.CurrentRoute = &routes.RouteRef{ID: "onboarding", Title: "User Onboarding"}
	known.CurrentStep = &routes.StepRef{ID: "ask_name"}
	res, err = a.Respond(ctx, routes.RespondInput{History: []*abi.Message{abi.NewUserTextMessage("Hello")}, Session: known})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("complete: %v, message: %q, model calls: %d\n", res.RouteComplete, res.Message, len(model.Requests()))
	// Output:
	// Nice to meet you, Ann! What's your email?
	// ask_name map[name:Ann]
	// complete: true, message: "", model calls: 1
}
