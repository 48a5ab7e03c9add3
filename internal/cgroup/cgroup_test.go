package cgroup

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/internal/testenv"
)

// mountinfo of a machine with cgroup v1's controllers apart and an empty cgroup v2
// hierarchy beside them (systemd's hybrid layout), with the cpu mount at root.
func hybridMountinfo(root string) string {
	return `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / ` + root + `/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / ` + root + `/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:37 / ` + root + `/unified rw,relatime - cgroup2 cgroup2 rw
`
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cgroup v1, cpu and cpuacct mounted apart: the group is made in both, the limit is
// written as quota over period, and the CPU time is cpuacct's.
func TestV1Apart(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root+"/cpu", root+"/cpuacct", root+"/unified")
	writeFile(t, root+"/unified/cgroup.controllers", "") // v2 without the cpu controller
	h, err := findHierarchy(strings.NewReader(hybridMountinfo(root)))
	if err != nil {
		t.Fatal(err)
	}
	if h != (hierarchy{cpu: root + "/cpu", cpuacct: root + "/cpuacct"}) {
		t.Fatalf("found %+v", h)
	}
	g, err := h.newGroup("host1", 0.4)
	if err != nil {
		t.Fatal(err)
	}
	if g.Version() != 1 || len(g.dirs) != 2 {
		t.Fatalf("version %d, dirs %q", g.Version(), g.dirs)
	}
	if p, q := readFile(t, root+"/cpu/host1/cpu.cfs_period_us"), readFile(t, root+"/cpu/host1/cpu.cfs_quota_us"); p != "100000" || q != "40000" {
		t.Errorf("period %s, quota %s; want 100000 and 40000", p, q)
	}
	writeFile(t, root+"/cpu/host1/cpu.stat", "nr_periods 50\nnr_throttled 7\nthrottled_time 123456\n")
	writeFile(t, root+"/cpuacct/host1/cpuacct.usage", "2500000000\n")
	s, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stat{CPU: 2500 * time.Millisecond, Periods: 50, Throttled: 7}) {
		t.Errorf("stat %+v", s)
	}
	if err := g.Prioritize(); err != nil || readFile(t, root+"/cpu/host1/cpu.shares") != "262144" {
		t.Errorf("Prioritize: %v", err)
	}
	mkdirs(t, root+"/cpuacct/host1")
	if err := g.Enter(42); err != nil || readFile(t, root+"/cpu/host1/cgroup.procs") != "42" || readFile(t, root+"/cpuacct/host1/cgroup.procs") != "42" {
		t.Errorf("Enter: %v", err)
	}
	if err := g.Leave(42); err != nil || readFile(t, root+"/cpu/cgroup.procs") != "42" || readFile(t, root+"/cpuacct/cgroup.procs") != "42" {
		t.Errorf("Leave: %v", err)
	}
	cmd := exec.Command("/bin/true", "a b", "c")
	g.Command(cmd)
	want := []string{"sh", "-c", `echo $$ >"$1" || exit 125; shift; echo $$ >"$1" || exit 125; shift; exec "$@"`, "sh",
		root + "/cpu/host1/cgroup.procs", root + "/cpuacct/host1/cgroup.procs", "/bin/true", "a b", "c"}
	if cmd.Path != "/bin/sh" || strings.Join(cmd.Args, "|") != strings.Join(want, "|") {
		t.Errorf("command %s %q\nwant /bin/sh %q", cmd.Path, cmd.Args, want)
	}
}

// cgroup v1 with cpu and cpuacct mounted together (cpu,cpuacct): one directory.
func TestV1Together(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root+"/cpu,cpuacct")
	h, err := findHierarchy(strings.NewReader("31 30 0:28 / " + root + "/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.newGroup("pg", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.dirs) != 1 || readFile(t, g.dirs[0]+"/cpu.cfs_quota_us") != "-1" {
		t.Errorf("dirs %q, quota %q", g.dirs, readFile(t, g.dirs[0]+"/cpu.cfs_quota_us"))
	}
}

// cgroup v2 with the cpu controller: the controller is enabled for the root's
// children, the limit is cpu.max, the CPU time cpu.stat's usage_usec.
func TestV2(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root+"/cgroup.controllers", "cpuset cpu io memory pids\n")
	writeFile(t, root+"/cgroup.subtree_control", "memory\n")
	h, err := findHierarchy(strings.NewReader("25 22 0:22 / " + root + " rw - cgroup2 cgroup2 rw,nsdelegate\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.newGroup("host2", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root+"/cgroup.subtree_control"); got != "+cpu" {
		t.Errorf("subtree_control: %q, want +cpu written", got)
	}
	if got := readFile(t, root+"/host2/cpu.max"); got != "25000 100000" {
		t.Errorf("cpu.max %q", got)
	}
	if err := g.Prioritize(); err != nil || readFile(t, root+"/host2/cpu.weight") != "10000" {
		t.Errorf("Prioritize: %v", err)
	}
	writeFile(t, root+"/host2/cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 3\nnr_throttled 1\nthrottled_usec 10\n")
	s, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stat{CPU: 1500 * time.Microsecond, Periods: 3, Throttled: 1}) {
		t.Errorf("stat %+v", s)
	}
	unlimited, err := h.newGroup("pg", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, unlimited.dirs[0]+"/cpu.max"); got != "max 100000" {
		t.Errorf("cpu.max without a limit: %q", got)
	}
}

// No cpu controller, a name that is a path, a limit that is no number: errors, and
// nothing made.
func TestRefusals(t *testing.T) {
	if _, err := findHierarchy(strings.NewReader("34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no cpu controller: %v", err)
	}
	root := t.TempDir()
	h := hierarchy{cpu: root, cpuacct: root}
	for _, name := range []string{"", "a/b", "..", "."} {
		if _, err := h.newGroup(name, 1); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	for _, cpus := range []float64{-1, 0 / zero(), 1 / zero()} {
		if _, err := h.newGroup("x", cpus); err == nil {
			t.Errorf("limit %v accepted", cpus)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("refused groups left %d entries", len(entries))
	}
	if _, err := (hierarchy{cpu: root + "/missing", cpuacct: root + "/missing"}).newGroup("x", 1); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a hierarchy that is not there: %v", err)
	}
}

func zero() float64 { return 0 }

func TestGOMAXPROCS(t *testing.T) {
	for cpus, want := range map[float64]int{0: 0, 0.1: 1, 0.4: 1, 1: 1, 1.5: 2, 3: 3} {
		if got := GOMAXPROCS(cpus); got != want {
			t.Errorf("GOMAXPROCS(%v) = %d, want %d", cpus, got, want)
		}
	}
}

// On this machine: a process that spins in a group limited to a fifth of a CPU is in
// the group from its start, gets no more than its share, and is throttled.
func TestLimitHolds(t *testing.T) {
	name := "terrarium-test-" + rand.Text()[:8]
	g, err := New(name, 0.2)
	if errors.Is(err, ErrUnsupported) {
		testenv.Need(t, "a CPU control group (root, and cgroup v2's cpu controller or cgroup v1's cpu and cpuacct)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Error(err)
		}
	})
	// Of the greatest weight, so that the spinner reaches its limit on a busy machine.
	if err := g.Prioritize(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "cat /proc/self/cgroup; while :; do :; done")
	g.Command(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := out.Read(buf)
		lines.Write(buf[:n])
		if err != nil {
			break
		}
	}
	cmd.Wait()
	wall := time.Since(start)
	if !strings.Contains(lines.String(), "/"+name+"\n") {
		t.Errorf("the process's /proc/self/cgroup does not name the group %s:\n%s", name, lines.String())
	}
	s, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup v%d: %v of CPU in %v of wall time, %d of %d periods throttled", g.Version(), s.CPU, wall, s.Throttled, s.Periods)
	if s.CPU <= 0 || s.CPU > wall/2 {
		t.Errorf("the group used %v of CPU in %v: want some, and at most a fifth of a CPU (with room for the shell)", s.CPU, wall)
	}
	// A machine too busy to give the spinner its fifth leaves it unthrottled.
	if s.Throttled == 0 && s.CPU > wall/8 {
		t.Errorf("the spinning process was never throttled (%d periods): the limit did not hold", s.Periods)
	}
}
