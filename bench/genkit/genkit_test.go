//go:build unix

// Package genkit_test compares Terrarium with Genkit Go (its latest release, v1.4.0) in
// one process, the same work through each, under the same tracer. It is a module of
// its own, so that Genkit is not a dependency of Terrarium:
//
//	cd bench/genkit && go test -run XXX -bench . -count 6 | tee out.txt
//	benchstat -col /fw out.txt
//
// The work: Generate with one model call (plain), Generate's tool loop (the model asks
// for a tool, then answers: two model calls and a tool call), and a chat turn (the
// user's message added to the history, the model's answer streamed and added, a topic
// added to the state), with the state in the process (chat) or in a memory store
// (chat-store). Genkit v1.4.0 has no session flow: its chat turn is a streaming flow
// per turn, its state in core/x/session (InMemoryStore for chat-store); Terrarium's is a
// session flow's turn, with a snapshot each turn in memory for chat-store. Both renew
// their session every 50 turns, so the history stays short.
//
// The tracers: recording is one OpenTelemetry SDK provider that samples every span (no
// exporter: what is measured is the spans' making), installed for both. With none,
// Terrarium runs with no provider installed; Genkit cannot (it installs an SDK provider
// of its own when it finds none), so it runs under an SDK provider that samples
// nothing, the nearest Genkit comes to no tracer.
package genkit_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	gsession "github.com/firebase/genkit/go/core/x/session"
	"github.com/firebase/genkit/go/genkit"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
)

const (
	question = "What is 1 + 2?"
	answer   = "The sum is 3."
)

var (
	recording = sdktrace.NewTracerProvider()
	sampling  = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
)

// useTracer installs the tracer provider of the mode for the framework.
func useTracer(mode, fw string) {
	switch {
	case mode == "recording":
		otel.SetTracerProvider(recording)
	case fw == "genkit":
		otel.SetTracerProvider(sampling)
	default:
		otel.SetTracerProvider(noop.NewTracerProvider())
	}
}

// cpuTime returns the CPU time the process has used, user and system: a loaded machine
// disturbs it less than the time an operation takes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Genkit's side.

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// chatIn is a chat turn's input: the session, renewed every 50 turns, and the text.
type chatIn struct {
	Session string `json:"session"`
	Text    string `json:"text"`
}

// chatState is a chat session's state.
type chatState struct {
	Messages []*ai.Message `json:"messages"`
	Topics   []string      `json:"topics"`
}

type genkitSide struct {
	g               *genkit.Genkit
	plain, tool     ai.Model
	add             ai.Tool
	chat, chatStore func(context.Context, chatIn) error
	mu              sync.Mutex
	states          map[string]*chatState
	store           *gsession.InMemoryStore[chatState]
}

var (
	gkOnce sync.Once
	gk     *genkitSide
)

// genkitModel answers at once, streaming its text when asked to: with a tool request
// when withTool is set and the last message is the user's (its input as a model's JSON
// decodes, numbers float64).
func genkitModel(withTool bool) ai.ModelFunc {
	return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		if withTool && req.Messages[len(req.Messages)-1].Role == ai.RoleUser {
			return &ai.ModelResponse{Message: ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: "add", Ref: "1", Input: map[string]any{"a": 1.0, "b": 2.0}})), FinishReason: ai.FinishReasonStop}, nil
		}
		if cb != nil {
			if err := cb(ctx, &ai.ModelResponseChunk{Content: []*ai.Part{ai.NewTextPart(answer)}}); err != nil {
				return nil, err
			}
		}
		return &ai.ModelResponse{Message: ai.NewModelTextMessage(answer), FinishReason: ai.FinishReasonStop}, nil
	}
}

// reset forgets the chat sessions: each run starts with none, so that what one run
// keeps does not weigh on the collections of the next.
func (s *genkitSide) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = map[string]*chatState{}
	s.store = gsession.NewInMemoryStore[chatState]()
}

func genkitSetup() *genkitSide {
	gkOnce.Do(func() {
		otel.SetTracerProvider(sampling) // before Init: Genkit installs its own where it finds none
		g := genkit.Init(context.Background())
		s := &genkitSide{g: g, states: map[string]*chatState{}, store: gsession.NewInMemoryStore[chatState]()}
		opts := &ai.ModelOptions{Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true}}
		s.plain = genkit.DefineModel(g, "bench/instant", opts, genkitModel(false))
		s.tool = genkit.DefineModel(g, "bench/tool", opts, genkitModel(true))
		s.add = genkit.DefineTool(g, "add", "adds two numbers", func(ctx *ai.ToolContext, in addIn) (int, error) { return in.A + in.B, nil })
		turn := func(ctx context.Context, history []*ai.Message, text string, send func(context.Context, string) error) ([]*ai.Message, error) {
			history = append(history, ai.NewUserTextMessage(text))
			for v, err := range genkit.GenerateStream(ctx, g, ai.WithModel(s.plain), ai.WithMessages(history...)) {
				if err != nil {
					return nil, err
				}
				if v.Done {
					history = append(history, v.Response.Message)
					continue
				}
				if err := send(ctx, v.Chunk.Text()); err != nil {
					return nil, err
				}
			}
			return history, nil
		}
		chat := genkit.DefineStreamingFlow(g, "chat", func(ctx context.Context, in chatIn, send func(context.Context, string) error) (string, error) {
			s.mu.Lock()
			st := s.states[in.Session]
			s.mu.Unlock()
			if st == nil {
				st = &chatState{}
			}
			msgs, err := turn(ctx, st.Messages, in.Text, send)
			if err != nil {
				return "", err
			}
			next := &chatState{Messages: msgs, Topics: append(slices.Clone(st.Topics), in.Text)}
			s.mu.Lock()
			s.states[in.Session] = next
			s.mu.Unlock()
			return answer, nil
		})
		chatStore := genkit.DefineStreamingFlow(g, "chatStore", func(ctx context.Context, in chatIn, send func(context.Context, string) error) (string, error) {
			s.mu.Lock()
			store := s.store
			s.mu.Unlock()
			sess, err := gsession.Load(ctx, store, in.Session)
			if err != nil {
				if sess, err = gsession.New(ctx, gsession.WithID[chatState](in.Session), gsession.WithStore[chatState](store)); err != nil {
					return "", err
				}
			}
			st := sess.State()
			msgs, err := turn(ctx, st.Messages, in.Text, send)
			if err != nil {
				return "", err
			}
			if err := sess.UpdateState(ctx, chatState{Messages: msgs, Topics: append(slices.Clone(st.Topics), in.Text)}); err != nil {
				return "", err
			}
			return answer, nil
		})
		s.chat = func(ctx context.Context, in chatIn) error {
			for _, err := range chat.Stream(ctx, in) {
				if err != nil {
					return err
				}
			}
			return nil
		}
		s.chatStore = func(ctx context.Context, in chatIn) error {
			for _, err := range chatStore.Stream(ctx, in) {
				if err != nil {
					return err
				}
			}
			return nil
		}
		gk = s
	})
	return gk
}

// Terrarium's side.

// ChatState is a Terrarium chat session's custom state.
type ChatState struct {
	Topics []string `json:"topics,omitempty"`
}

type terrariumSide struct {
	r           *agent.Registry
	plain, tool agent.Model
	add         agent.Tool
	// newChat makes the chat flow, with a store of its own or none: each run starts
	// with no session kept.
	newChat func(store bool) *session.SessionFlow[struct{}, ChatState]
}

// terrariumModel answers at once, streaming its text when asked to: with a tool
// request when withTool is set and the last message is the user's (its input as a
// model's JSON decodes, numbers float64).
func terrariumModel(name string, withTool bool) agent.Model {
	return agent.NewModel(name, nil, func(ctx context.Context, req *abi.GenerateRequest, cb agent.ModelStreamCallback) (*abi.GenerateResponse, error) {
		if withTool && req.Messages[len(req.Messages)-1].Role == abi.RoleUser {
			return &abi.GenerateResponse{Message: abi.NewModelMessage(abi.NewToolRequestPart(&abi.ToolRequest{Name: "add", Ref: "1", Input: map[string]any{"a": 1.0, "b": 2.0}})), FinishReason: abi.FinishStop}, nil
		}
		if cb != nil {
			if err := cb(ctx, &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart(answer)}}); err != nil {
				return nil, err
			}
		}
		return &abi.GenerateResponse{Message: abi.NewModelTextMessage(answer), FinishReason: abi.FinishStop}, nil
	})
}

func terrariumSetup() *terrariumSide {
	s := &terrariumSide{r: agent.NewRegistry(), plain: terrariumModel("bench/instant", false), tool: terrariumModel("bench/tool", true)}
	s.add = agent.NewTool("add", "adds two numbers", func(ctx context.Context, in addIn) (int, error) { return in.A + in.B, nil })
	body := func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[struct{}], p *session.SessionFlowParams[struct{}, ChatState]) error {
		sess := p.Session
		for in := range inCh {
			sess.AddMessages(in.Messages...)
			for v, err := range agent.GenerateStream(ctx, s.r, agent.WithModel(s.plain), agent.WithMessages(sess.Messages()...)) {
				if err != nil {
					return err
				}
				if v.Done {
					sess.AddMessages(v.Response.Message)
					continue
				}
				if err := resp.SendChunk(v.Chunk); err != nil {
					return err
				}
			}
			text := in.Messages[0].Text()
			sess.UpdateCustom(func(c ChatState) ChatState {
				c.Topics = append(slices.Clone(c.Topics), text)
				return c
			})
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	}
	s.newChat = func(store bool) *session.SessionFlow[struct{}, ChatState] {
		var opts []session.SessionFlowOption[ChatState]
		if store {
			opts = append(opts, session.WithSnapshotStore(session.NewInMemorySnapshotStore[ChatState]()))
		}
		return session.DefineSessionFlow(agent.NewRegistry(), "chat", body, opts...)
	}
	return s
}

// The benchmark.

// BenchmarkVsGenkit runs each work through each framework (fw=genkit, fw=terrarium),
// under each tracer. Besides the time, it reports the process's CPU time per operation
// (cpu-ns/op), steadier on a shared machine.
func BenchmarkVsGenkit(b *testing.B) {
	ctx := context.Background()
	gks := genkitSetup()
	ts := terrariumSetup()
	works := map[string]map[string]func(b *testing.B) func(i int) error{
		"plain": {
			"genkit": func(*testing.B) func(int) error {
				return func(int) error {
					_, err := genkit.Generate(ctx, gks.g, ai.WithModel(gks.plain), ai.WithPrompt(question))
					return err
				}
			},
			"terrarium": func(*testing.B) func(int) error {
				return func(int) error {
					_, err := agent.Generate(ctx, ts.r, agent.WithModel(ts.plain), agent.WithPrompt(question))
					return err
				}
			},
		},
		"toolloop": {
			"genkit": func(*testing.B) func(int) error {
				return func(int) error {
					_, err := genkit.Generate(ctx, gks.g, ai.WithModel(gks.tool), ai.WithPrompt(question), ai.WithTools(gks.add))
					return err
				}
			},
			"terrarium": func(*testing.B) func(int) error {
				return func(int) error {
					_, err := agent.Generate(ctx, ts.r, agent.WithModel(ts.tool), agent.WithPrompt(question), agent.WithTools(ts.add))
					return err
				}
			},
		},
		"chat":       {"genkit": genkitChat(gks, gks.chat), "terrarium": terrariumChat(func() *session.SessionFlow[struct{}, ChatState] { return ts.newChat(false) })},
		"chat-store": {"genkit": genkitChat(gks, gks.chatStore), "terrarium": terrariumChat(func() *session.SessionFlow[struct{}, ChatState] { return ts.newChat(true) })},
	}
	for _, mode := range []string{"none", "recording"} {
		for _, work := range []string{"plain", "toolloop", "chat", "chat-store"} {
			for _, fw := range []string{"genkit", "terrarium"} {
				b.Run("tracer="+mode+"/work="+work+"/fw="+fw, func(b *testing.B) {
					useTracer(mode, fw)
					op := works[work][fw](b)
					b.ReportAllocs()
					b.ResetTimer()
					cpu := cpuTime()
					for i := 0; i < b.N; i++ {
						if err := op(i); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// sessions numbers the benchmarks' sessions, so that none is used twice.
var sessions int

// genkitChat runs chat turns through a Genkit flow, on a new session every 50 turns.
func genkitChat(gks *genkitSide, run func(context.Context, chatIn) error) func(*testing.B) func(int) error {
	return func(*testing.B) func(int) error {
		gks.reset()
		var id string
		return func(i int) error {
			if i%50 == 0 {
				sessions++
				id = "s" + strconv.Itoa(sessions)
			}
			return run(context.Background(), chatIn{Session: id, Text: question})
		}
	}
}

// terrariumChat runs chat turns on a connection to a session flow made for the run,
// renewed every 50 turns.
func terrariumChat(newFlow func() *session.SessionFlow[struct{}, ChatState]) func(*testing.B) func(int) error {
	return func(b *testing.B) func(int) error {
		flow := newFlow()
		in := &session.SessionFlowInput{Messages: []*abi.Message{abi.NewUserTextMessage(question)}}
		var conn *session.SessionFlowConnection[struct{}, ChatState]
		b.Cleanup(func() {
			if conn != nil {
				conn.Close()
				conn.Output()
			}
		})
		return func(i int) error {
			if i%50 == 0 {
				if conn != nil {
					conn.Close()
					if _, err := conn.Output(); err != nil {
						return err
					}
				}
				var err error
				if conn, err = flow.StreamBidi(context.Background()); err != nil {
					return err
				}
			}
			if err := conn.Send(in); err != nil {
				return err
			}
			for _, err := range conn.Receive() {
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
}
