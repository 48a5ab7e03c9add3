// Package routes is seed 002's conversation engine (the @falai/agent API) in Go: an
// agent whose conversations follow routes, each route a graph of steps that collect
// the fields of its data, with always-on routing between routes, guidelines, terms,
// capabilities, domains of tools, canned responses and templates.
//
// A turn (Agent.Respond, Agent.RespondStream):
//
//  1. routing, only when there is something to decide: with several routes the model
//     scores each (the conversation switches only when another route beats the current
//     one by a margin), chooses the next step where the current one branches on
//     conditions, and extracts the data the user's message states, in one call;
//  2. step traversal: the conversation stays at a step until its fields are known,
//     then follows transitions whose requires are met, passing through steps whose
//     skipIf holds or whose fields are known, running step tools on the way, so data
//     known in advance can complete the route at once (an empty answer, RouteComplete);
//  3. the answer: one call whose output is the message and the fields the user may
//     have stated (the step's, and the route's others still missing), each checked
//     against the route's schema before it is merged.
//
// So a turn costs one model call with one route, two with several, none when the
// route completes. Each route keeps its own data: leaving a route for another and
// coming back finds it as it was; a route's OnComplete chooses the route the next
// turn enters.
//
// Real models leave fields blank, write prose instead of JSON, add fields, get types
// wrong. A turn absorbs such faults (an empty value is not collected, a field failing
// the schema is dropped, prose is the message, a missing template variable renders as
// nothing) and lists them in Response.Warnings and its trace span; WithStrict makes
// them errors instead.
//
// DefineFlow binds an agent to a session flow of package agent/session, where the
// State lives in snapshots; Manager keeps seed 002's persisted sessions in any
// store.Store, and an agent given one (WithPersistence) saves every turn and resumes
// by session ID; Build makes an agent from a Definition (agent files).
//
// Where TypeScript's idiom does not fit Go, Go's is used, and docs/architecture.md
// lists the choices ("Routed conversations (seed 002)").
package routes
