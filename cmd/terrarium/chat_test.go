package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// terminal runs a command in a pseudo-terminal, as a person at a terminal would.
type terminal struct {
	t    *testing.T
	f    *os.File
	cmd  *exec.Cmd
	mu   sync.Mutex
	cond *sync.Cond
	out  strings.Builder
	seen int // how much of out expect has consumed
	eof  bool
}

func startTerminal(t *testing.T, name string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(name, args...)
	f, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	// The terminal is the child's stdin (fd 0), and its controlling terminal.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	term := &terminal{t: t, f: f, cmd: cmd}
	term.cond = sync.NewCond(&term.mu)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			if err != nil {
				term.eof = true
			}
			term.cond.Broadcast()
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
	})
	return term
}

// expect waits until the output shows a match of re after what was already matched,
// and returns the match's groups. A guard fails the test if it never comes.
func (term *terminal) expect(pattern string) []string {
	term.t.Helper()
	re := regexp.MustCompile(pattern)
	guard := time.AfterFunc(time.Minute, func() {
		term.mu.Lock()
		term.eof = true
		term.cond.Broadcast()
		term.mu.Unlock()
	})
	defer guard.Stop()
	term.mu.Lock()
	defer term.mu.Unlock()
	for {
		rest := term.out.String()[term.seen:]
		if loc := re.FindStringSubmatchIndex(rest); loc != nil {
			m := re.FindStringSubmatch(rest)
			term.seen += loc[1]
			return m
		}
		if term.eof {
			term.t.Fatalf("the terminal never showed %q; it shows:\n%s", pattern, rest)
		}
		term.cond.Wait()
	}
}

func (term *terminal) send(line string) {
	term.t.Helper()
	if _, err := io.WriteString(term.f, line+"\n"); err != nil {
		term.t.Fatal(err)
	}
}

// converse holds a two-turn conversation, lists the snapshots and resumes the first,
// then exits.
func converse(t *testing.T, term *terminal) {
	term.expect(`\[a new session: it starts with your first message\]`)
	term.expect(`> `)
	term.send("hello")
	term.expect(`\[session [0-9a-f-]+\]`)
	term.expect(`echo: hello`)
	first := term.expect(`\[snapshot ([0-9a-f]{64})\]`)[1]
	term.expect(`> `)
	term.send(`/call askUser {"question": "Which city?"}`)
	term.expect(`\[askUser asks\] Which city\?`)
	term.send("Lisbon")
	term.expect(`Tool results: "Lisbon"`)
	term.expect(`> `)
	term.send("/snapshots")
	term.expect(first + `  turn 0`)
	term.expect(`turn 2`)
	term.expect(`> `)
	// By a prefix of its ID; one that begins no snapshot's is refused, and the
	// connection stays.
	term.send("/resume 00000000")
	term.expect(`\[error: .*no snapshot ID begins with 00000000\]`)
	term.send("/resume " + first[:8])
	term.expect(`\[session [0-9a-f-]+ from snapshot ` + first + `\]`)
	term.expect(`> `)
	term.send("after the resume")
	term.expect(`echo: after the resume`)
	term.expect(`> `)
	term.send("/snapshots")
	// The resumed line branches from the first snapshot: turn 1 again.
	term.expect(`turn 1  turnEnd  4 messages`)
	term.send("/exit")
	if err := term.cmd.Wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
}

func TestChatInATerminalInProcess(t *testing.T) {
	term := startTerminal(t, binary(t), "chat", "-data", t.TempDir(), exampleDeployment+"/assistant.yaml")
	converse(t, term)
}

func TestChatInATerminalWithAServer(t *testing.T) {
	s := sharedServe(t)
	term := startTerminal(t, binary(t), "chat", s.url)
	converse(t, term)
}

const travelExample = "../../examples/travel"

// travel holds a conversation with the travel example's routed agent, which shows
// where it stands after each turn, then resumes its first snapshot.
func travel(t *testing.T, term *terminal) {
	term.expect(`> `)
	term.send("I'd like to fly to Lisbon")
	term.expect(`Noted\. Now tell me the day of departure\.\r?\n\[route flight, step ask_date\]`)
	first := term.expect(`\[snapshot ([0-9a-f]{64})\]`)[1]
	term.expect(`> `)
	term.send("Actually, find me a hotel in Porto instead")
	term.expect(`\[route hotel, step ask_nights\]`)
	term.expect(`> `)
	term.send("3 nights")
	term.expect(`\[route hotel complete\]`)
	term.expect(`> `)
	term.send("/snapshots")
	term.expect(first + `  turn 0  turnEnd  2 messages  completed  route flight, step ask_date`)
	term.expect(`turn 2  turnEnd  5 messages  completed  route hotel, step END_ROUTE`)
	term.expect(`> `)
	term.send("/resume " + first)
	term.expect(`\[session [0-9a-f-]+ from snapshot ` + first + `\]`)
	term.expect(`> `)
	term.send("On 2025-07-14")
	term.expect(`\[route flight, step ask_passengers\]`)
	term.expect(`> `)
	term.send("/exit")
	if err := term.cmd.Wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
}

func TestChatWithARoutedAgentInProcess(t *testing.T) {
	term := startTerminal(t, binary(t), "chat", "-data", t.TempDir(), travelExample+"/travel.yaml")
	travel(t, term)
}

func TestChatWithARoutedAgentOnAServer(t *testing.T) {
	s := startServe(t, "-data", t.TempDir(), travelExample)
	term := startTerminal(t, binary(t), "chat", s.url)
	travel(t, term)
}

// TestChatReconnects drops the chat's connection between turns, while no host is
// there to take it again, and in the middle of turns: the chat says so, tries again
// with growing waits until a host answers, and goes on in the same session, sending a
// message again only if its turn did not end.
func TestChatReconnects(t *testing.T) {
	s := sharedServe(t)
	p := startProxy(t, s.url)
	term := startTerminal(t, binary(t), "chat", p.url())
	term.expect(`> `)
	term.send("/help")
	term.expect(`/resume <snapshot>    continue from a snapshot: its ID, or its first 8 or more digits`)
	term.expect(`/exit, /quit`)
	term.expect(`> `)
	term.send("/nope")
	term.expect(`\[unknown command /nope: /help lists them\]`)
	term.expect(`> `)
	term.send("before the drop")
	sid := term.expect(`\[session ([0-9a-f-]+)\]`)[1]
	term.expect(`echo: before the drop`)
	term.expect(`> `)

	// Between turns, with no host to go to for a while.
	p.route()
	if p.drop() == 0 {
		t.Fatal("the chat's connection was not open through the proxy")
	}
	term.expect(`\[the connection was lost \(.+\)\]`)
	term.expect(`\[could not connect: .+\]`)
	term.expect(`\[trying again in [0-9.]+s \(2 of 8\)\]`)
	p.route(s.url)
	term.expect(`\[reconnected: session ` + sid + `\]`)
	term.expect(`> `)
	term.send("after the drop")
	term.expect(`echo: after the drop`)
	term.expect(`> `)

	// In a turn, before the server had its message: sent again.
	cut := p.cutOn(true, "", 16)
	term.send("lost on the way")
	<-cut
	term.expect(`\[the connection was lost during the turn \(.+\)\]`)
	term.expect(`\[reconnected: session ` + sid + `\]`)
	term.expect(`\[sending it again\]`)
	term.expect(`echo: lost on the way`)
	term.expect(`> `)

	// In a turn, after the server kept it: its answer is shown, not asked again.
	cut = p.cutOn(false, `"snapshotCreated"`, 0)
	term.send("kept while away")
	<-cut
	term.expect(`\[the connection was lost during the turn \(.+\)\]`)
	term.expect(`\[a turn ended while the connection was down: snapshot [0-9a-f]{64}\]\r?\necho: kept while away`)
	term.expect(`\[reconnected: session ` + sid + `\]`)
	term.expect(`> `)

	// Each message is in the session once.
	term.send("/snapshots")
	term.expect(`turn 3  turnEnd  8 messages  completed`)
	term.expect(`> `)
	term.send("/exit")
	if err := term.cmd.Wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
	var snaps struct{ Snapshots []struct{ TurnIndex int } }
	s.call(t, "GET", "/api/agents/assistant/sessions/"+sid+"/snapshots", "", &snaps)
	if len(snaps.Snapshots) != 4 {
		t.Errorf("the session has %d snapshots, want one per message: 4", len(snaps.Snapshots))
	}
}

// TestChatFollowsItsSessionWhenTheHostDrains: a host of a fleet sent SIGTERM closes
// the chat's socket with 1012; the chat reconnects to the same address, which the load
// balancer (a proxy) sends to the other host once the first refuses, and the session
// goes on there.
func TestChatFollowsItsSessionWhenTheHostDrains(t *testing.T) {
	hosts := startFleet(t, 2)
	p := startProxy(t, hosts[0].url, hosts[1].url)
	term := startTerminal(t, binary(t), "chat", p.url())
	term.expect(`> `)
	term.send("on the first host")
	sid := term.expect(`\[session ([0-9a-f-]+)\]`)[1]
	term.expect(`echo: on the first host`)
	term.expect(`> `)
	if err := hosts[0].stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("the first host after SIGTERM: %v\n%s", err, hosts[0].stderr)
	}
	term.expect(`\[the connection was lost \(the server closed it: 1012 .+\)\]`)
	term.expect(`\[reconnected: session ` + sid + `\]`)
	term.expect(`> `)
	term.send("on the second host")
	term.expect(`echo: on the second host`)
	term.expect(`> `)
	term.send("/exit")
	if err := term.cmd.Wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
	if got := hosts[1].userTexts(t, "echo", sid); strings.Join(got, "|") != "on the first host|on the second host" {
		t.Errorf("the session holds %q", got)
	}
}

// TestChatShowsFailedTurnsAndGoesOn: each fault of the fault injection, the first one
// on the session's first turn, is printed as a failed turn (its code, its message,
// the model or tool that failed) and the chat waits for the next line, which takes a
// successful turn in the same session.
func TestChatShowsFailedTurnsAndGoesOn(t *testing.T) {
	s := startServe(t, "-data", t.TempDir(), fragileDeployment(t))
	term := startTerminal(t, binary(t), "chat", "-agent", "fragile", s.url)
	term.expect(`> `)
	var sid string
	var good []string
	for i, f := range faults {
		term.send(f.say)
		if i == 0 {
			sid = term.expect(`\[session ([0-9a-f-]+)\]`)[1]
		}
		term.expect(`\[turn failed: ` + f.code + `: (?s:.+?) \(` + regexp.QuoteMeta(f.who()) + `\)\]`)
		term.expect(`> `)
		hello := fmt.Sprintf("hello %d", i)
		term.send(hello)
		term.expect(`ok: ` + hello + `\r?\n`)
		term.expect(`> `)
		good = append(good, hello)
	}
	term.send("/session")
	term.expect(`session ` + sid)
	term.expect(`> `)
	term.send("/exit")
	if err := term.cmd.Wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
	checkFaultHistory(t, s, sid, good)
}
