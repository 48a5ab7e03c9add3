package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/terrarium-ai/terrarium/internal/cgroup"
	"github.com/terrarium-ai/terrarium/store/pgstore/pgtest"
)

// hostCPUsEnv sets the CPU share of each host of BenchmarkFleetTurns (default
// defaultHostCPUs).
const hostCPUsEnv = "TERRARIUM_BENCH_HOST_CPUS"

// defaultHostCPUs is a host's CPU share in BenchmarkFleetTurns: three hosts take 0.9 of
// a 2-CPU machine, leaving PostgreSQL (about half a host's CPU per turn) and the
// clients the rest, with room for what else the machine runs.
const defaultHostCPUs = 0.3

const (
	// fleetClientsPerHost is the number of clients per host sending turns at once, each
	// waiting for its answer before the next: enough to keep a host's share busy while
	// others wait on PostgreSQL.
	fleetClientsPerHost = 8
	// fleetTurnsPerSession bounds a session's history, which every turn sends to the
	// model, so that the benchmark measures turns, not a growing history.
	fleetTurnsPerSession = 20
)

// BenchmarkFleetTurns: turns per second of the echo agent (the offline plugin's
// instant model) kept in one PostgreSQL database, served by one, two or three
// terrarium serve processes. Each host runs in a control group of its own limited to
// $TERRARIUM_BENCH_HOST_CPUS CPUs (default 0.3), with GOMAXPROCS to match, so that the
// hosts cannot share out the machine's cores among themselves: what adding a host
// adds is a fixed share. PostgreSQL (a throwaway cluster of the benchmark's own) runs
// in a group of its own, unlimited, to account for what it spends. The clients, in
// this process, send fleetClientsPerHost turns per host at once over HTTP, each
// session fleetTurnsPerSession turns; each turn goes to the next host (the session
// moves, as a load balancer without affinity sends it, and the host reloads it from
// the database) or, sticky, to the host that created the session.
//
// Reported beside turns/s: the turns' p50 and p99 latency, the CPU each host and
// PostgreSQL used over the run (cores: CPU seconds per second), their CPU per turn,
// the share of enforcement periods in which the hosts were throttled (near 1: the
// hosts' limit is what bounds the rate), and the clients' own CPU. The hosts',
// PostgreSQL's and the clients' groups have the greatest CPU weight, so that other work
// on the machine yields to them: on a shared machine the benchmark measures its
// limits, not its neighbours (the hosts still get no more than their share). Where no control
// group can be made (not root, no cpu controller), the hosts run unlimited, sharing
// the machine's cores as before, on the database $TERRARIUM_TEST_POSTGRES names, and
// nothing is accounted; the benchmark logs so.
func BenchmarkFleetTurns(b *testing.B) {
	cpus := defaultHostCPUs
	if v := os.Getenv(hostCPUsEnv); v != "" {
		var err error
		if cpus, err = strconv.ParseFloat(v, 64); err != nil || cpus <= 0 {
			b.Fatalf("%s=%q: want a positive number of CPUs", hostCPUsEnv, v)
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the start: %s", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	prefix := "terrarium-bench-" + strings.ToLower(rand.Text()[:8])
	pg, err := cgroup.New(prefix+"-postgres", 0)
	if err != nil && !errors.Is(err, cgroup.ErrUnsupported) {
		b.Fatal(err)
	}
	if pg != nil {
		// Registered first, so removed last: after the cluster has stopped.
		b.Cleanup(func() {
			if err := pg.Remove(); err != nil {
				b.Error(err)
			}
		})
		if err := pg.Prioritize(); err != nil {
			b.Fatal(err)
		}
		prioritizeSelf(b, prefix)
		b.Setenv(pgtest.EnvURL, pgtest.NewCluster(b, pgtest.WithCommand(pg.Command)).URL())
		b.Logf("cgroup v%d: each host limited to %v CPUs (GOMAXPROCS=%d), PostgreSQL unlimited, every %v", pg.Version(), cpus, cgroup.GOMAXPROCS(cpus), cgroup.Period)
	} else {
		b.Logf("no control group can be made (%v): the hosts run without a CPU limit, sharing the machine's cores, and no CPU is accounted", err)
	}
	agents := fleetAgents(b)
	for n := 1; n <= 3; n++ {
		fleet := startBenchFleet(b, prefix, n, cpus, pg != nil, agents)
		modes := []bool{false, true}
		if n == 1 {
			modes = []bool{true} // one host: a session has nowhere to move
		}
		for _, sticky := range modes {
			b.Run(fmt.Sprintf("hosts=%d/sticky=%v", n, sticky), func(b *testing.B) {
				fleet.run(b, sticky, pg)
			})
		}
		fleet.stop(b)
	}
}

// benchFleet is the hosts of one round of BenchmarkFleetTurns, each in its group (none
// without control groups).
type benchFleet struct {
	hosts  []*served
	groups []*cgroup.Group
	client *http.Client
}

// startBenchFleet starts n hosts on a new schema of the benchmark's database, each in
// a new group limited to cpus when limited.
func startBenchFleet(b *testing.B, prefix string, n int, cpus float64, limited bool, agents string) *benchFleet {
	b.Helper()
	url := pgtest.URL(b)
	f := &benchFleet{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: fleetClientsPerHost * n}}}
	for i := range n {
		cmd := serveCmd(b, "-store", url, "-data", b.TempDir(), agents)
		if limited {
			g, err := cgroup.New(fmt.Sprintf("%s-%dhosts-%d", prefix, n, i+1), cpus)
			if err != nil {
				f.stop(b)
				b.Fatal(err)
			}
			f.groups = append(f.groups, g)
			if err := g.Prioritize(); err != nil {
				f.stop(b)
				b.Fatal(err)
			}
			g.Command(cmd)
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cgroup.GOMAXPROCS(cpus)))
		}
		f.hosts = append(f.hosts, launch(b, cmd))
	}
	return f
}

// prioritizeSelf moves this process, the clients, into a group of its own, unlimited
// and of the greatest weight, as the hosts' and PostgreSQL's are, until the benchmark
// ends.
func prioritizeSelf(b *testing.B, prefix string) {
	g, err := cgroup.New(prefix+"-clients", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := g.Leave(os.Getpid()); err != nil {
			b.Error(err)
		}
		if err := g.Remove(); err != nil {
			b.Error(err)
		}
	})
	if err := g.Prioritize(); err != nil {
		b.Fatal(err)
	}
	if err := g.Enter(os.Getpid()); err != nil {
		b.Fatal(err)
	}
}

// stop kills the hosts and removes their groups.
func (f *benchFleet) stop(b *testing.B) {
	for _, h := range f.hosts {
		h.cmd.Process.Kill()
		<-h.exited
	}
	for _, g := range f.groups {
		if err := g.Remove(); err != nil {
			b.Error(err)
		}
	}
	f.client.CloseIdleConnections()
}

// run sends b.N turns and reports the rate, the latencies and the CPU accounting.
func (f *benchFleet) run(b *testing.B, sticky bool, pg *cgroup.Group) {
	n := len(f.hosts)
	groups := slices.Clone(f.groups)
	if pg != nil {
		groups = append(groups, pg) // last
	}
	before := statGroups(b, groups)
	var selfBefore syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &selfBefore)

	var next, left atomic.Int64
	left.Store(int64(b.N))
	latencies := make([][]time.Duration, fleetClientsPerHost*n)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range latencies {
		wg.Go(func() {
			var id string
			var h *served
			for turn := 0; left.Add(-1) >= 0; turn = (turn + 1) % fleetTurnsPerSession {
				if turn == 0 || !sticky {
					h = f.hosts[next.Add(1)%int64(n)]
				}
				if turn == 0 {
					var err error
					if id, err = f.newSession(h); err != nil {
						b.Error(err)
						return
					}
				}
				t0 := time.Now()
				if err := f.turn(h, id); err != nil {
					b.Error(err)
					return
				}
				latencies[c] = append(latencies[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var selfAfter syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &selfAfter)
	after := statGroups(b, groups)

	all := slices.Concat(latencies...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "turns/s")
	b.ReportMetric(ms(all[len(all)/2]), "p50-ms")
	b.ReportMetric(ms(all[len(all)*99/100]), "p99-ms")
	self := time.Duration(syscall.TimevalToNsec(selfAfter.Utime)+syscall.TimevalToNsec(selfAfter.Stime)) -
		time.Duration(syscall.TimevalToNsec(selfBefore.Utime)+syscall.TimevalToNsec(selfBefore.Stime))
	b.ReportMetric(self.Seconds()/elapsed.Seconds(), "client-cores")
	if len(groups) == 0 {
		return
	}
	perTurn := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(all)) }
	var hostCPU time.Duration
	var periods, throttled int64
	for i := range f.groups {
		used := after[i].CPU - before[i].CPU
		hostCPU += used
		periods += after[i].Periods - before[i].Periods
		throttled += after[i].Throttled - before[i].Throttled
		b.ReportMetric(used.Seconds()/elapsed.Seconds(), fmt.Sprintf("host%d-cores", i+1))
	}
	b.ReportMetric(perTurn(hostCPU), "host-cpu-µs/turn")
	if periods > 0 {
		b.ReportMetric(float64(throttled)/float64(periods), "host-throttled")
	}
	if pg != nil {
		used := after[len(after)-1].CPU - before[len(before)-1].CPU
		b.ReportMetric(used.Seconds()/elapsed.Seconds(), "pg-cores")
		b.ReportMetric(perTurn(used), "pg-cpu-µs/turn")
	}
}

// statGroups reads every group's accounting.
func statGroups(b *testing.B, groups []*cgroup.Group) []cgroup.Stat {
	b.Helper()
	out := make([]cgroup.Stat, len(groups))
	for i, g := range groups {
		var err error
		if out[i], err = g.Stat(); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// newSession opens a session of echo on h; it may run in any goroutine.
func (f *benchFleet) newSession(h *served) (string, error) {
	resp, err := f.client.Post(h.url+"/api/agents/echo/sessions", "application/json", strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var info struct{ SessionID string }
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("new session: status %d, %v", resp.StatusCode, err)
	}
	return info.SessionID, nil
}

// turn runs one turn of the session on h; it may run in any goroutine.
func (f *benchFleet) turn(h *served, id string) error {
	resp, err := f.client.Post(h.url+"/api/agents/echo/sessions/"+id+"/turns", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("turn on %s: status %d, %v: %s", h.url, resp.StatusCode, err, body)
	}
	return nil
}
