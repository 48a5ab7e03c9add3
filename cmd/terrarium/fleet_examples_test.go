package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/terrarium-ai/terrarium/deploy"
)

// The image and the example deployments of a fleet (Containerfile, examples/fleet)
// stay true to terrarium serve: the flags they give it exist and parse, their probes
// ask for the paths serve answers on the port it listens on, and what the image
// carries is what the agent files load.

const (
	containerfile = "../../Containerfile"
	fleetExamples = "../../examples/fleet"
)

// image is what the tests read of the Containerfile.
type image struct {
	entrypoint, cmd []string
	expose          []string
	volumes         []string
	user            string
	stages          int
	copies          [][]string // COPY instructions: flags, sources and destination
}

// readImage reads the instructions of the Containerfile that the tests check.
func readImage(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile(containerfile)
	if err != nil {
		t.Fatal(err)
	}
	var img image
	// Continuation lines belong to their instruction.
	src := strings.ReplaceAll(string(data), "\\\n", " ")
	for line := range strings.Lines(src) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		jsonArray := func() []string {
			var a []string
			if err := json.Unmarshal([]byte(rest), &a); err != nil {
				t.Fatalf("Containerfile: %s %s: want the JSON form: %v", instr, rest, err)
			}
			return a
		}
		switch strings.ToUpper(instr) {
		case "FROM":
			img.stages++
		case "ENTRYPOINT":
			img.entrypoint = jsonArray()
		case "CMD":
			img.cmd = jsonArray()
		case "EXPOSE":
			img.expose = append(img.expose, strings.Fields(rest)...)
		case "VOLUME":
			img.volumes = append(img.volumes, jsonArray()...)
		case "USER":
			img.user = rest
		case "COPY":
			img.copies = append(img.copies, strings.Fields(rest))
		}
	}
	return img
}

// copiedTo returns the destination of the COPY of src (from the build context, or
// from=stage's), or "".
func (img image) copiedTo(from, src string) string {
	for _, c := range img.copies {
		want := ""
		if from != "" {
			want = "--from=" + from
		}
		if slices.Contains(c, want) == (want != "") && len(c) >= 2 && slices.Contains(c[:len(c)-1], src) {
			return c[len(c)-1]
		}
	}
	return ""
}

// serveArgs are the flags the image's entrypoint gives terrarium serve.
func (img image) serveArgs(t *testing.T) []string {
	t.Helper()
	if len(img.entrypoint) < 2 || img.entrypoint[1] != "serve" {
		t.Fatalf("Containerfile: ENTRYPOINT %q: want terrarium serve and its flags", img.entrypoint)
	}
	return img.entrypoint[2:]
}

// serveUsage returns the flags terrarium serve defines and the kind of value each
// takes ("" for a switch), as its usage lists them.
func serveUsage(t *testing.T) map[string]string {
	t.Helper()
	var stderr bytes.Buffer
	if code := serveCommand(t.Context(), []string{"-h"}, io.Discard, &stderr); code != exitUsage {
		t.Fatalf("serve -h: exit %d", code)
	}
	kinds := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)(?: (\S+))?`).FindAllStringSubmatch(stderr.String(), -1) {
		kinds[m[1]] = m[2]
	}
	if len(kinds) < 5 || kinds["addr"] != "string" {
		t.Fatalf("serve -h listed the flags %v:\n%s", kinds, stderr.String())
	}
	return kinds
}

// parseServe parses args as terrarium serve's command line, failing t (naming where
// they come from) on a flag serve does not have, a value of the wrong kind, or
// anything but one directory after the flags. It returns the flags set and the
// directory.
func parseServe(t *testing.T, where string, args []string) (map[string]string, string) {
	t.Helper()
	fs := flag.NewFlagSet(where, flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	for name, kind := range serveUsage(t) {
		switch kind {
		case "":
			fs.Bool(name, false, "")
		case "duration":
			fs.Duration(name, 0, "")
		case "int":
			fs.Int64(name, 0, "")
		default:
			fs.String(name, "", "")
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: terrarium serve %q: %v", where, args, err)
	}
	if fs.NArg() != 1 {
		t.Fatalf("%s: terrarium serve %q: want one directory of agent files after the flags, have %q", where, args, fs.Args())
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	return set, fs.Arg(0)
}

// durationFlag returns a duration flag's value.
func durationFlag(t *testing.T, flags map[string]string, name string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(flags[name])
	if err != nil {
		t.Fatalf("-%s %q: %v", name, flags[name], err)
	}
	return d
}

// servedPaths are the paths serve answers GET on, from its OpenAPI document (whose
// own test checks it against the routes).
func servedPaths(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../server/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for p, ops := range doc.Paths {
		if ops["get"] != nil {
			out[p] = true
		}
	}
	return out
}

// imageServe is what the image runs: the entrypoint's flags, its port, and its data
// directory.
type imageServe struct {
	img     image
	args    []string
	port    string
	dataDir string
}

func readImageServe(t *testing.T) imageServe {
	t.Helper()
	img := readImage(t)
	args := img.serveArgs(t)
	flags, _ := parseServe(t, "Containerfile ENTRYPOINT and CMD", append(slices.Clone(args), img.cmd...))
	_, port, err := net.SplitHostPort(flags["addr"])
	if err != nil {
		t.Fatalf("Containerfile: -addr %q: %v", flags["addr"], err)
	}
	return imageServe{img: img, args: args, port: port, dataDir: flags["data"]}
}

// The image: built in stages, run as a user of its own, listening where it says, its
// data on a volume, serving agents whose plugins it carries.
func TestContainerfile(t *testing.T) {
	s := readImageServe(t)
	img := s.img
	if img.stages < 2 {
		t.Errorf("Containerfile: %d FROM: want a build stage and a runtime stage", img.stages)
	}
	if img.user == "" || img.user == "root" || strings.HasPrefix(img.user, "0") {
		t.Errorf("Containerfile: USER %q: want a user other than root", img.user)
	}
	if !slices.Contains(img.expose, s.port) {
		t.Errorf("Containerfile: EXPOSE %q, but serve listens on %s", img.expose, s.port)
	}
	if !slices.ContainsFunc(img.volumes, func(v string) bool { return within(s.dataDir, v) }) {
		t.Errorf("Containerfile: -data %s is on none of the volumes %q: a read-only root file system refuses it", s.dataDir, img.volumes)
	}
	_, dir := parseServe(t, "Containerfile", append(slices.Clone(s.args), img.cmd...))
	if got := img.copiedTo("", "examples/fleet/agents/"); path.Clean(got) != dir {
		t.Errorf("Containerfile: serves the agents in %s, but copies examples/fleet/agents/ to %q", dir, got)
	}
	plugins := img.copiedTo("build", "/out/plugins/")
	if plugins == "" {
		t.Fatal("Containerfile: no COPY --from=build /out/plugins/")
	}
	files, err := deploy.ReadDir(filepath.Join(fleetExamples, "agents"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, p := range f.Plugins {
			dirName, ok := strings.CutSuffix(strings.TrimPrefix(p.Path, path.Clean(plugins)+"/"), ".wasm")
			if !ok || strings.Contains(dirName, "/") {
				t.Errorf("%s: plugin %s is not a .wasm file of the image's %s", f.Path, p.Path, plugins)
				continue
			}
			if _, err := os.Stat(filepath.Join("../../plugins", dirName, "main.go")); err != nil {
				t.Errorf("%s: plugin %s: the image builds plugins/*/, and plugins/%s is not a plugin: %v", f.Path, p.Path, dirName, err)
			}
		}
	}
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// The Compose file: the hosts run the image with flags serve has, on the database of
// the Compose file, read-only with their data on a volume, given longer to stop than
// their drain takes; HAProxy checks /readyz on serve's port.
func TestFleetCompose(t *testing.T) {
	s := readImageServe(t)
	data, err := os.ReadFile(filepath.Join(fleetExamples, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Command         []string       `yaml:"command"`
			Environment     map[string]any `yaml:"environment"`
			ReadOnly        bool           `yaml:"read_only"`
			Volumes         []string       `yaml:"volumes"`
			StopGracePeriod string         `yaml:"stop_grace_period"`
			Deploy          struct {
				Replicas  int `yaml:"replicas"`
				Resources struct {
					Limits map[string]string `yaml:"limits"`
				} `yaml:"resources"`
			} `yaml:"deploy"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	host, ok := compose.Services["terrarium"]
	if !ok {
		t.Fatalf("compose.yaml: no service terrarium among %v", compose.Services)
	}
	if host.Build == nil || filepath.Clean(filepath.Join(fleetExamples, host.Build.Context, host.Build.Dockerfile)) != filepath.Clean(containerfile) {
		t.Errorf("compose.yaml: terrarium is not built from the Containerfile: %+v", host.Build)
	}
	flags, _ := parseServe(t, "compose.yaml", append(slices.Clone(s.args), host.Command...))
	store := flags["store"]
	if i := strings.Index(store, "@"); !strings.HasPrefix(store, "postgres://") || i < 0 {
		t.Errorf("compose.yaml: -store %q: want a postgres:// URL", store)
	} else if dbHost, _, _ := strings.Cut(store[i+1:], ":"); compose.Services[dbHost].Environment == nil {
		t.Errorf("compose.yaml: -store %q names the host %q, no service of the file", store, dbHost)
	}
	if !host.ReadOnly {
		t.Error("compose.yaml: terrarium's root file system is not read_only")
	}
	if !slices.ContainsFunc(host.Volumes, func(v string) bool { return within(s.dataDir, strings.Split(v, ":")[len(strings.Split(v, ":"))-1]) }) {
		t.Errorf("compose.yaml: -data %s is on none of the volumes %q", s.dataDir, host.Volumes)
	}
	if grace, err := time.ParseDuration(host.StopGracePeriod); err != nil || grace <= durationFlag(t, flags, "shutdown-timeout") {
		t.Errorf("compose.yaml: stop_grace_period %q: want longer than -shutdown-timeout %s, or the drain is cut short", host.StopGracePeriod, flags["shutdown-timeout"])
	}
	if host.Deploy.Replicas < 2 || host.Deploy.Resources.Limits["cpus"] == "" || host.Deploy.Resources.Limits["memory"] == "" {
		t.Errorf("compose.yaml: want 2 replicas or more with CPU and memory limits, have %+v", host.Deploy)
	}

	cfg, err := os.ReadFile(filepath.Join(fleetExamples, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if !servedPaths(t)["/readyz"] || !regexp.MustCompile(`(?m)^\s*option httpchk GET /readyz$`).Match(cfg) {
		t.Error("haproxy.cfg: want the health check option httpchk GET /readyz, a path serve answers")
	}
	m := regexp.MustCompile(`(?m)^\s*server-template \S+ \d+ (\S+):(\d+) .*\bcheck\b`).FindSubmatch(cfg)
	if m == nil || string(m[1]) != "terrarium" || string(m[2]) != s.port {
		t.Errorf("haproxy.cfg: want a checked server-template of the service terrarium on port %s, have %q", s.port, m)
	}
}

// The Kubernetes manifests: a Deployment of the image with flags serve has, probes of
// /healthz and /readyz on serve's port, resource requests and limits, a read-only root
// and the data on a volume, more time to stop than its drain; a Service and a
// PodDisruptionBudget of its pods.
func TestFleetKubernetes(t *testing.T) {
	s := readImageServe(t)
	type probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type manifest struct {
		Kind string `yaml:"kind"`
		Spec struct {
			// Deployment
			Replicas int `yaml:"replicas"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Args  []string `yaml:"args"`
						Ports []struct {
							Name          string `yaml:"name"`
							ContainerPort int    `yaml:"containerPort"`
						} `yaml:"ports"`
						StartupProbe   *probe `yaml:"startupProbe"`
						LivenessProbe  *probe `yaml:"livenessProbe"`
						ReadinessProbe *probe `yaml:"readinessProbe"`
						Resources      struct {
							Requests map[string]string `yaml:"requests"`
							Limits   map[string]string `yaml:"limits"`
						} `yaml:"resources"`
						SecurityContext struct {
							ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
						} `yaml:"securityContext"`
						VolumeMounts []struct {
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					SecurityContext struct {
						RunAsNonRoot bool `yaml:"runAsNonRoot"`
					} `yaml:"securityContext"`
				} `yaml:"spec"`
			} `yaml:"template"`
			// A Deployment's and a PodDisruptionBudget's {matchLabels: ...}; a
			// Service's, the labels themselves.
			Selector       map[string]any `yaml:"selector"`
			MaxUnavailable any            `yaml:"maxUnavailable"`
			MinAvailable   any            `yaml:"minAvailable"`
			// Service
			Ports []struct {
				TargetPort any `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	data, err := os.ReadFile(filepath.Join(fleetExamples, "kubernetes", "terrarium.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var m manifest
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubernetes/terrarium.yaml: %v", err)
		}
		kinds[m.Kind] = m
	}
	dep, svc, pdb := kinds["Deployment"], kinds["Service"], kinds["PodDisruptionBudget"]
	if len(dep.Spec.Template.Spec.Containers) != 1 || svc.Kind == "" || pdb.Kind == "" {
		t.Fatalf("kubernetes/terrarium.yaml: want a Deployment of one container, a Service and a PodDisruptionBudget; have %v", slices.Collect(maps.Keys(kinds)))
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	flags, _ := parseServe(t, "kubernetes/terrarium.yaml", append(slices.Clone(s.args), c.Args...))
	if flags["store"] == "" {
		t.Error("kubernetes/terrarium.yaml: no -store: the hosts of a fleet share PostgreSQL")
	}

	// A port as a probe or a Service names it: a number, or a container port's name.
	portOf := func(p any) string {
		switch p := p.(type) {
		case string:
			for _, cp := range c.Ports {
				if cp.Name == p {
					return strconv.Itoa(cp.ContainerPort)
				}
			}
			return "no port named " + p
		case uint64, int64, int:
			return fmt.Sprint(p)
		}
		return fmt.Sprintf("%v (%T)", p, p)
	}
	served := servedPaths(t)
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"startupProbe", c.StartupProbe, "/healthz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		switch {
		case pr.p == nil || pr.p.HTTPGet == nil:
			t.Errorf("kubernetes/terrarium.yaml: no %s.httpGet", pr.name)
		case pr.p.HTTPGet.Path != pr.path || !served[pr.p.HTTPGet.Path]:
			t.Errorf("kubernetes/terrarium.yaml: %s asks for %s: want %s, which serve answers", pr.name, pr.p.HTTPGet.Path, pr.path)
		case portOf(pr.p.HTTPGet.Port) != s.port:
			t.Errorf("kubernetes/terrarium.yaml: %s asks port %v (%s), but serve listens on %s", pr.name, pr.p.HTTPGet.Port, portOf(pr.p.HTTPGet.Port), s.port)
		}
	}
	for _, kind := range []string{"cpu", "memory"} {
		if c.Resources.Requests[kind] == "" || c.Resources.Limits[kind] == "" {
			t.Errorf("kubernetes/terrarium.yaml: want a request and a limit of %s, have %+v", kind, c.Resources)
		}
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem || !pod.SecurityContext.RunAsNonRoot {
		t.Error("kubernetes/terrarium.yaml: want readOnlyRootFilesystem and runAsNonRoot")
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(v struct {
		MountPath string `yaml:"mountPath"`
	}) bool {
		return within(s.dataDir, v.MountPath)
	}) {
		t.Errorf("kubernetes/terrarium.yaml: -data %s is on none of the volume mounts %+v", s.dataDir, c.VolumeMounts)
	}
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= durationFlag(t, flags, "shutdown-timeout") {
		t.Errorf("kubernetes/terrarium.yaml: terminationGracePeriodSeconds %d: want longer than -shutdown-timeout %s, or the drain is cut short", pod.TerminationGracePeriodSeconds, flags["shutdown-timeout"])
	}
	labels := dep.Spec.Template.Metadata.Labels
	// matches reports whether a selector's labels select the Deployment's pods.
	matches := func(sel any) bool {
		m, _ := sel.(map[string]any)
		for k, v := range m {
			if labels[k] != v {
				return false
			}
		}
		return len(m) > 0
	}
	if dep.Spec.Replicas < 2 || !matches(dep.Spec.Selector["matchLabels"]) {
		t.Errorf("kubernetes/terrarium.yaml: the Deployment: want 2 replicas or more selecting its pods")
	}
	if !matches(pdb.Spec.Selector["matchLabels"]) || pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Errorf("kubernetes/terrarium.yaml: the PodDisruptionBudget: want one of the Deployment's pods and a budget, have %+v", pdb.Spec)
	}
	if !matches(map[string]any(svc.Spec.Selector)) || len(svc.Spec.Ports) == 0 || portOf(svc.Spec.Ports[0].TargetPort) != s.port {
		t.Errorf("kubernetes/terrarium.yaml: the Service: want the Deployment's pods on serve's port %s, have selector %v, ports %+v", s.port, svc.Spec.Selector, svc.Spec.Ports)
	}
}
