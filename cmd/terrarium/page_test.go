package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// pageAgents writes the agents of the page's recovery test: assistant, the offline
// model with the calculator and askUser, and fragile, which fails on purpose
// (faults_test.go), both kept in Badger.
func pageAgents(t *testing.T) string {
	t.Helper()
	plugins, err := filepath.Abs("../../plugins")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := "name: assistant\nmodel: {name: offline/echo}\ntools: [askUser, calculator/calc]\nplugins:\n" +
		"  - path: " + filepath.Join(plugins, "offline") + "\n" +
		"  - path: " + filepath.Join(plugins, "calculator") + "\n    grants: {timeout: 5s}\n"
	if err := os.WriteFile(filepath.Join(dir, "assistant.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fragile.yaml"), []byte(fragileAgent(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageRun is what page-recovers.mjs saw at one width.
type pageRun struct {
	Errors, Console, LoadConsole, LoadRequests     []string
	Sockets, SocketsOnLoad, SessionsOnLoad         int
	SidebarShown, MenuShown                        bool
	SidebarAfterMenu, SidebarAfterBackdrop         bool
	Session, SessionAfterDrop, SessionAfterRestart string
	Turns                                          []struct {
		Text, Status string
		Models       int
	}
	Failures []struct {
		Say, Status, Detail, Under string
		Shown                      bool
		Marked                     int
	}
	FragileSession                                  string
	FailedSnapshots                                 int
	OverflowsFailed                                 bool
	Resent, KeptOnce, ResumedMessages, RestartClose int
	UnknownPrefix, SessionAfterUnknown              string
	UnknownConsole, RestartConsole                  []string
	SessionList, SessionTimes                       []string
	Overflows                                       bool
}

// TestWebPageRecoversInChromium drives the page in a headless Chromium at a desktop's
// width and a phone's, through a proxy standing for a load balancer that drops its
// WebSocket when told (page-recovers.mjs says what it does). The screenshots land in
// $TERRARIUM_SCREENSHOTS, or the test's temporary directory.
func TestWebPageRecoversInChromium(t *testing.T) {
	dir := clients(t)
	chromium := need(t, "chromium")
	args := []string{"-data", t.TempDir(), pageAgents(t)}
	var mu sync.Mutex
	s := startServe(t, args...)
	host := func() *served {
		mu.Lock()
		defer mu.Unlock()
		return s
	}
	p := startProxy(t, s.url)
	// restart is a rolling restart of a fleet of one: the host is sent SIGTERM, drains
	// (closing the page's socket with 1012) and exits, and another takes its place
	// behind the proxy, on the same data.
	restart := func() error {
		old := host()
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		if err := <-old.exited; err != nil {
			return fmt.Errorf("the host exited with %v after SIGTERM:\n%s", err, old.stderr)
		}
		next, err := startServing(serveCmd(t, args...))
		if err != nil {
			return err
		}
		t.Cleanup(func() {
			next.cmd.Process.Kill()
			<-next.exited
		})
		mu.Lock()
		s = next
		mu.Unlock()
		p.route(next.url)
		return nil
	}
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch how := r.URL.Query().Get("how"); {
		case how == "":
			p.drop()
		case how == "restart":
			if err := restart(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case how == "host":
			p.cutOn(true, "", 16)
		case strings.HasPrefix(how, "page:"):
			p.cutOn(false, strings.TrimPrefix(how, "page:"), 0)
		default:
			http.Error(w, "how: "+how, http.StatusBadRequest)
		}
	}))
	defer control.Close()
	shots := filepath.Dir(screenshot(t, "x"))
	var got struct{ Desktop, Phone pageRun }
	page := []string{p.url() + "/", shots, chromium, control.URL}
	for _, f := range faults {
		page = append(page, f.say)
	}
	node(t, dir, "page-recovers.mjs", &got, page...)
	t.Logf("screenshots: %s/chat-page-{desktop,phone}{,-failed}.png, chat-page-phone-menu.png", shots)

	for name, r := range map[string]pageRun{"desktop": got.Desktop, "phone": got.Phone} {
		if len(r.Errors) != 0 || len(r.LoadConsole) != 0 {
			t.Errorf("%s: page errors %q, console errors on load %q", name, r.Errors, r.LoadConsole)
		}
		if len(r.Console) != 0 {
			t.Errorf("%s: console errors %q", name, r.Console)
		}
		if r.SocketsOnLoad != 0 {
			t.Errorf("%s: %d WebSockets opened on load, want none until the first message", name, r.SocketsOnLoad)
		}
		for _, path := range r.LoadRequests {
			if strings.HasSuffix(path, "/snapshots") || strings.HasSuffix(path, "/connect") || strings.Contains(path, "favicon.ico") {
				t.Errorf("%s: the load asked for %s", name, path)
			}
		}
		if r.Session == "" || r.SessionAfterDrop != r.Session {
			t.Errorf("%s: session %q, after the drop %q", name, r.Session, r.SessionAfterDrop)
		}
		if r.Overflows || r.OverflowsFailed {
			t.Errorf("%s: the page is wider than the window (%v, after the failures %v)", name, r.Overflows, r.OverflowsFailed)
		}
		for _, turn := range r.Turns {
			if want := "turn ended (stop)"; turn.Status != want || turn.Models != 1 {
				t.Errorf("%s: %q ended %q with %d answers, want %q with one", name, turn.Text, turn.Status, turn.Models, want)
			}
		}
		// The fault injection: each failure under its message, saying what failed; the
		// session then holds the good turns alone, and a failed snapshot per fault.
		if len(r.Failures) != len(faults) {
			t.Fatalf("%s: %d failures seen, want %d", name, len(r.Failures), len(faults))
		}
		var good []string
		for i, f := range r.Failures {
			want := faults[i]
			if f.Status != "turn failed" || !f.Shown || f.Under != want.say || f.Marked != 1 ||
				!strings.HasPrefix(f.Detail, want.code+": ") || !strings.HasSuffix(f.Detail, "("+want.who()+")") {
				t.Errorf("%s: %q shows %+v, want a failure under it, %s, naming %s", name, want.say, f, want.code, want.who())
			}
			good = append(good, "after "+want.say)
		}
		if r.FailedSnapshots != len(faults) {
			t.Errorf("%s: %d failed snapshots listed, want %d", name, r.FailedSnapshots, len(faults))
		}
		checkFaultHistory(t, host(), r.FragileSession, good)
	}
	if d := got.Desktop; !d.SidebarShown || d.MenuShown {
		t.Errorf("desktop: sidebar shown %v, menu shown %v; want the sidebar, no menu", d.SidebarShown, d.MenuShown)
	}
	if ph := got.Phone; ph.SidebarShown || !ph.MenuShown || !ph.SidebarAfterMenu || ph.SidebarAfterBackdrop {
		t.Errorf("phone: sidebar shown %v, menu shown %v, after the menu %v, after the backdrop %v; want it folded away behind the menu",
			ph.SidebarShown, ph.MenuShown, ph.SidebarAfterMenu, ph.SidebarAfterBackdrop)
	}
	d := got.Desktop
	if d.SessionsOnLoad != 0 || got.Phone.SessionsOnLoad != 2 {
		t.Errorf("sessions listed on load: %d, then %d; want none stored by a page load", d.SessionsOnLoad, got.Phone.SessionsOnLoad)
	}
	if d.SessionAfterRestart != d.Session || d.RestartClose != 1 {
		t.Errorf("after the host's restart: session %q, want %q; %d closes with 1012 seen, want 1", d.SessionAfterRestart, d.Session, d.RestartClose)
	}
	for _, line := range d.RestartConsole {
		if !strings.Contains(line, "net::ERR_") && !strings.Contains(line, "WebSocket connection to") {
			t.Errorf("while the host restarted, the console logged %q: want only the browser's own lines of requests that found no host", line)
		}
	}
	if d.Resent != 1 || d.KeptOnce != 1 {
		t.Errorf("a turn lost on the way was sent again %d times, want 1; a turn kept while away shows %d times, want 1", d.Resent, d.KeptOnce)
	}
	if !strings.Contains(d.UnknownPrefix, "no snapshot ID begins with 00000000") || d.SessionAfterUnknown != d.Session {
		t.Errorf("an unknown prefix: %q, the session then %q", d.UnknownPrefix, d.SessionAfterUnknown)
	}
	if len(d.UnknownConsole) != 1 || !strings.Contains(d.UnknownConsole[0], "404") {
		t.Errorf("an unknown prefix logged %q, want the browser's one line of its 404", d.UnknownConsole)
	}
	if d.ResumedMessages != 4 {
		t.Errorf("resumed from the first snapshot by prefix, then a turn: %d messages, want 4", d.ResumedMessages)
	}
	if strings.Join(d.SessionList, "|") != "a second session|hello from the desktop" || strings.Join(d.SessionTimes, "|") != "just now|just now" {
		t.Errorf("session list %q, %q", d.SessionList, d.SessionTimes)
	}
}
