// Package cgroup runs processes in Linux control groups of their own, each limited to
// a share of the machine's CPU time, and reads the CPU time each group used: what the
// fleet benchmark needs to give every host a fixed share of a small machine and to
// account for what the hosts and PostgreSQL really spent.
//
// It speaks both kinds of hierarchy: cgroup v2's cpu controller (cpu.max, cpu.stat), and
// cgroup v1's cpu and cpuacct controllers (cpu.cfs_quota_us over cpu.cfs_period_us,
// cpuacct.usage), mounted together or apart. Making groups needs the right to write to
// the hierarchy (root, usually); where that or the controller is missing, New fails
// with an error wrapping ErrUnsupported and the caller goes without.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrUnsupported: this process cannot make CPU-limited control groups here (no cpu
// controller is mounted, or it may not write to it).
var ErrUnsupported = errors.New("cgroup: no CPU control group can be made")

// Period is the enforcement period of a group's CPU limit: Kubernetes' (the CFS
// default), so that a limited process is throttled as a pod with the same limit is.
const Period = 100 * time.Millisecond

// hierarchy is where groups are made: the mount points of the controllers.
type hierarchy struct {
	v2      string // cgroup v2's mount, with the cpu controller; "" on v1
	cpu     string // cgroup v1's cpu controller
	cpuacct string // cgroup v1's cpuacct controller (may be cpu's mount)
}

// Group is a control group made by New. Remove it once its processes have exited.
type Group struct {
	name string
	h    hierarchy
	dirs []string // the group's directory in each hierarchy, cpu first
	cpus float64
}

// New makes a control group called name (a new directory at the top of each
// hierarchy) whose processes together get at most cpus CPUs' worth of time (0.4: 40 ms
// of every 100 ms); cpus 0 sets no limit and only accounts.
func New(name string, cpus float64) (*Group, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer f.Close()
	h, err := findHierarchy(f)
	if err != nil {
		return nil, err
	}
	return h.newGroup(name, cpus)
}

// findHierarchy reads /proc/self/mountinfo for the cpu controller: cgroup v2's if it
// has it, else cgroup v1's cpu and cpuacct.
func findHierarchy(mountinfo io.Reader) (hierarchy, error) {
	var h hierarchy
	var v2 []string
	lines := bufio.NewScanner(mountinfo)
	for lines.Scan() {
		// 31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
		fields := strings.Fields(lines.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		mount, fstype, opts := fields[4], fields[sep+1], strings.Split(fields[sep+3], ",")
		switch fstype {
		case "cgroup2":
			v2 = append(v2, mount)
		case "cgroup":
			if slices.Contains(opts, "cpu") && h.cpu == "" {
				h.cpu = mount
			}
			if slices.Contains(opts, "cpuacct") && h.cpuacct == "" {
				h.cpuacct = mount
			}
		}
	}
	if err := lines.Err(); err != nil {
		return hierarchy{}, fmt.Errorf("%w: reading mountinfo: %v", ErrUnsupported, err)
	}
	for _, m := range v2 {
		if controllers, err := os.ReadFile(filepath.Join(m, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(controllers)), "cpu") {
			return hierarchy{v2: m}, nil
		}
	}
	if h.cpu == "" || h.cpuacct == "" {
		return hierarchy{}, fmt.Errorf("%w: neither cgroup v2's cpu controller nor cgroup v1's cpu and cpuacct are mounted", ErrUnsupported)
	}
	return h, nil
}

// newGroup makes the group's directories and sets its limit.
func (h hierarchy) newGroup(name string, cpus float64) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup: %q is not a group name", name)
	}
	if cpus < 0 || math.IsNaN(cpus) || math.IsInf(cpus, 0) {
		return nil, fmt.Errorf("cgroup: a limit of %v CPUs: want 0 (none) or more", cpus)
	}
	g := &Group{name: name, h: h, cpus: cpus}
	roots := []string{h.v2}
	if h.v2 == "" {
		roots = []string{h.cpu}
		if h.cpuacct != h.cpu {
			roots = append(roots, h.cpuacct)
		}
	} else if err := enableCPU(h.v2); err != nil {
		return nil, err
	}
	for _, root := range roots {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Remove()
			if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EROFS) {
				return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
			}
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		g.dirs = append(g.dirs, dir)
	}
	if err := g.setLimit(); err != nil {
		g.Remove()
		return nil, err
	}
	return g, nil
}

// enableCPU turns the cpu controller on for the children of cgroup v2's root, where
// it is off until asked for.
func enableCPU(root string) error {
	path := filepath.Join(root, "cgroup.subtree_control")
	on, err := os.ReadFile(path)
	if err == nil && slices.Contains(strings.Fields(string(on)), "cpu") {
		return nil
	}
	if err := os.WriteFile(path, []byte("+cpu"), 0o644); err != nil {
		return fmt.Errorf("%w: enabling the cpu controller in %s: %v", ErrUnsupported, path, err)
	}
	return nil
}

// setLimit writes the group's CPU limit.
func (g *Group) setLimit() error {
	period := Period.Microseconds()
	quota := int64(math.Round(g.cpus * float64(period)))
	if g.cpus > 0 {
		quota = max(quota, 1000) // the kernel's least quota: 1 ms
	}
	var writes [][2]string
	switch {
	case g.h.v2 != "" && g.cpus > 0:
		writes = [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, period)}}
	case g.h.v2 != "":
		writes = [][2]string{{"cpu.max", fmt.Sprintf("max %d", period)}}
	case g.cpus > 0:
		writes = [][2]string{{"cpu.cfs_period_us", strconv.FormatInt(period, 10)}, {"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)}}
	default:
		writes = [][2]string{{"cpu.cfs_quota_us", "-1"}}
	}
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(g.dirs[0], w[0]), []byte(w[1]), 0o644); err != nil {
			return fmt.Errorf("cgroup: setting %s of %s: %w", w[0], g.name, err)
		}
	}
	return nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// CPUs returns the group's limit in CPUs (0: none).
func (g *Group) CPUs() float64 { return g.cpus }

// Version returns the kind of hierarchy the group is in: 1 or 2.
func (g *Group) Version() int {
	if g.h.v2 != "" {
		return 2
	}
	return 1
}

// Command makes cmd, not yet started, start inside the group: a shell moves itself
// into the group and then executes cmd's program in its place, so the process, and
// every process it starts, is in the group from its first instruction and keeps
// cmd's process ID. cmd's environment, directory and files are as they were.
func (g *Group) Command(cmd *exec.Cmd) {
	if cmd.Err != nil {
		return // Start reports it
	}
	var script strings.Builder
	for range g.dirs {
		// exit 125: as env and chroot do when they fail to run the command.
		script.WriteString(`echo $$ >"$1" || exit 125; shift; `)
	}
	script.WriteString(`exec "$@"`)
	args := []string{"sh", "-c", script.String(), "sh"}
	for _, dir := range g.dirs {
		args = append(args, filepath.Join(dir, "cgroup.procs"))
	}
	args = append(append(args, cmd.Path), cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/bin/sh", args
}

// Prioritize gives the group the greatest CPU weight there is (cgroup v1's cpu.shares,
// v2's cpu.weight), so that the processes outside it yield to its processes when the
// CPU is contended; they still get no more than the group's limit. A benchmark on a
// machine shared with other work measures its limits, not the other work.
func (g *Group) Prioritize() error {
	file, weight := "cpu.shares", "262144"
	if g.h.v2 != "" {
		file, weight = "cpu.weight", "10000"
	}
	if err := os.WriteFile(filepath.Join(g.dirs[0], file), []byte(weight), 0o644); err != nil {
		return fmt.Errorf("cgroup: setting %s of %s: %w", file, g.name, err)
	}
	return nil
}

// Enter moves the running process pid, every thread of it, into the group.
func (g *Group) Enter(pid int) error {
	return g.move(pid, g.dirs)
}

// Leave moves the process pid out of the group, back to the top of the hierarchy
// where New made the group, so that the group can be removed.
func (g *Group) Leave(pid int) error {
	parents := make([]string, len(g.dirs))
	for i, dir := range g.dirs {
		parents[i] = filepath.Dir(dir)
	}
	return g.move(pid, parents)
}

func (g *Group) move(pid int, dirs []string) error {
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroup: moving process %d to %s: %w", pid, dir, err)
		}
	}
	return nil
}

// Stat is what a group's processes used, since the group was made.
type Stat struct {
	// CPU is the CPU time its processes used, user and system.
	CPU time.Duration
	// Periods is the number of enforcement periods in which they ran; Throttled, of
	// those, the periods in which they used up the limit and waited.
	Periods, Throttled int64
}

// Stat reads the group's accounting.
func (g *Group) Stat() (Stat, error) {
	var s Stat
	stat, err := readKeyed(filepath.Join(g.dirs[0], "cpu.stat"))
	if err != nil {
		return Stat{}, err
	}
	s.Periods, s.Throttled = stat["nr_periods"], stat["nr_throttled"]
	if g.h.v2 != "" {
		s.CPU = time.Duration(stat["usage_usec"]) * time.Microsecond
		return s, nil
	}
	usage, err := os.ReadFile(filepath.Join(g.dirs[len(g.dirs)-1], "cpuacct.usage"))
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup: cpuacct.usage of %s: %w", g.name, err)
	}
	s.CPU = time.Duration(ns)
	return s, nil
}

// readKeyed reads a file of "key value" lines, as cpu.stat is.
func readKeyed(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// Remove deletes the group. Its processes must have exited: the kernel refuses to
// remove a group that has some, and Remove gives them a second to be reaped.
func (g *Group) Remove() error {
	var errs []error
	for _, dir := range g.dirs {
		var err error
		for try := 0; try < 20; try++ {
			if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: removing %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// GOMAXPROCS returns the GOMAXPROCS matching a limit of cpus: the CPUs it allows,
// rounded up, at least 1; 0 for no limit (keep the runtime's default).
func GOMAXPROCS(cpus float64) int {
	if cpus <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(cpus)))
}
