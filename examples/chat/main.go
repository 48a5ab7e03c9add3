// Chat: seed 003's chat agent with snapshots (section 7.1), resumed from a snapshot
// (7.2), and the same agent with state the client keeps (7.3).
//
// The model is the programmable test model answering "echo: <your text>", so the
// example runs offline. Snapshots are kept in Badger in a temporary directory unless
// -dir names one; run it twice with the same -dir and -session to resume across
// processes.
//
//	go run ./examples/chat
//	go run ./examples/chat -dir /tmp/chat -session demo
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/agent/session"
	"github.com/terrarium-ai/terrarium/agent/testmodel"
	"github.com/terrarium-ai/terrarium/store/badgerstore"
)

// ChatState is the application's own state, kept in every snapshot.
type ChatState struct {
	Topics []string `json:"topics,omitempty"`
}

// ChatStatus is what the agent streams about its progress.
type ChatStatus struct {
	Phase string `json:"phase"`
}

func main() {
	dir := flag.String("dir", "", "directory for the Badger snapshot store (default: a temporary one)")
	session := flag.String("session", "", "session ID to start or resume (default: a new one)")
	flag.Parse()
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "terrarium-chat-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	if err := run(context.Background(), os.Stdout, *dir, *session); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chat:", err)
	os.Exit(1)
}

func run(ctx context.Context, w io.Writer, dir, sessionID string) error {
	db, err := badgerstore.Open(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	snapshots := session.NewSnapshotStore[ChatState](db)

	r := agent.NewRegistry()
	model := testmodel.Define(r, "demo/echo", testmodel.WithHandler(func(req *abi.GenerateRequest) testmodel.Turn {
		text := "echo: " + req.Messages[len(req.Messages)-1].Text()
		words := strings.SplitAfter(text, " ")
		var chunks []*abi.GenerateResponseChunk
		for _, w := range words {
			chunks = append(chunks, &abi.GenerateResponseChunk{Content: []*abi.Part{abi.NewTextPart(w)}})
		}
		return testmodel.Turn{Chunks: chunks, Response: &abi.GenerateResponse{Message: abi.NewModelTextMessage(text)}}
	}))

	// 7.1: the chat agent. Each turn: add the input, stream the answer, note the topic,
	// end the turn (which takes a snapshot).
	body := func(ctx context.Context, inCh <-chan *session.SessionFlowInput, resp *session.Responder[ChatStatus], params *session.SessionFlowParams[ChatStatus, ChatState]) error {
		sess := params.Session
		for input := range inCh {
			sess.AddMessages(input.Messages...)
			if err := resp.SendStatus(ChatStatus{Phase: "generating"}); err != nil {
				return err
			}
			for v, err := range agent.GenerateStream(ctx, r, agent.WithModel(model), agent.WithMessages(sess.Messages()...)) {
				if err != nil {
					return err
				}
				if v.Done {
					sess.AddMessages(v.Response.Message)
				} else if err := resp.SendChunk(v.Chunk); err != nil {
					return err
				}
			}
			sess.UpdateCustom(func(s ChatState) ChatState {
				s.Topics = append(s.Topics, input.Messages[0].Text())
				return s
			})
			if err := resp.EndTurn(); err != nil {
				return err
			}
		}
		return nil
	}
	chat := session.DefineSessionFlow(r, "chatAgent", body,
		session.WithSnapshotStore(snapshots),
		session.WithSnapshotCallback(session.SnapshotOn[ChatState](session.SnapshotEventTurnEnd, session.SnapshotEventInvocationEnd)),
	)

	var opts []session.StreamBidiOption[ChatState]
	if sessionID != "" {
		opts = append(opts, session.WithSessionID[ChatState](sessionID))
	}
	conn, err := chat.StreamBidi(ctx, opts...)
	if err != nil {
		return err
	}
	var lastSnapshot string
	for _, text := range []string{"Hello! Tell me about Go programming.", "What are channels used for?"} {
		if lastSnapshot, err = talk(w, conn, text); err != nil {
			return err
		}
	}
	conn.Close()
	out, err := conn.Output()
	if err != nil {
		return err
	}
	// The store keeps the session: the output names its last snapshot.
	last, err := snapshots.GetSnapshot(ctx, out.SnapshotID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session %s: %d messages, snapshots this run: %d\n", out.SessionID, len(last.State.Messages), len(out.SnapshotIDs))
	all, err := snapshots.ListSnapshots(ctx, out.SessionID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "snapshots in the session: %d\n", len(all))

	// 7.2: resume from the last snapshot in a new connection.
	resumed, err := chat.StreamBidi(ctx, session.WithSnapshotID[ChatState](lastSnapshot))
	if err != nil {
		return err
	}
	if _, err := talk(w, resumed, "Continue our discussion about channels"); err != nil {
		return err
	}
	resumed.Close()
	out, err = resumed.Output()
	if err != nil {
		return err
	}
	if last, err = snapshots.GetSnapshot(ctx, out.SnapshotID); err != nil {
		return err
	}
	fmt.Fprintf(w, "resumed: %d messages, topics %q\n", len(last.State.Messages), last.State.Custom.Topics)

	// 7.3: client-managed state. A flow without a snapshot store leaves the state to the
	// client, which keeps out.State (its session ID inside) and sends it back. (A flow
	// with a store refuses client state: its history is the server's.)
	portable := session.DefineSessionFlow(r, "portableChat", body)
	client, err := portable.StreamBidi(ctx, session.WithState(&last.State))
	if err != nil {
		return err
	}
	if _, err := talk(w, client, "Thanks!"); err != nil {
		return err
	}
	client.Close()
	out, err = client.Output()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "client-managed: %d messages in the state the client keeps\n", len(out.State.Messages))
	return nil
}

// talk sends one message and prints the streamed turn; it returns the turn's snapshot.
func talk(w io.Writer, conn *session.SessionFlowConnection[ChatStatus, ChatState], text string) (string, error) {
	fmt.Fprintf(w, "> %s\n", text)
	if err := conn.SendText(text); err != nil {
		return "", err
	}
	var snapshot string
	for chunk, err := range conn.Receive() {
		if err != nil {
			return "", err
		}
		if chunk.Chunk != nil {
			fmt.Fprint(w, chunk.Chunk.Text())
		}
		if chunk.SnapshotCreated != "" {
			snapshot = chunk.SnapshotCreated
			fmt.Fprintf(w, "\n[snapshot %s…]", snapshot[:12])
		}
		if chunk.EndTurn {
			fmt.Fprintln(w)
			break
		}
	}
	return snapshot, nil
}
