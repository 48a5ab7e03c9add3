package deploy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/terrarium-ai/terrarium/agent/routes"
	"github.com/terrarium-ai/terrarium/agent/session"
)

// defineRouted defines a routed agent (seed 002): routes.Build from the file's
// definition, bound to a session flow by routes.DefineFlow.
func (d *Deployment) defineRouted(f *File, a *Agent) error {
	ra, err := routes.Build(d.reg, f.Definition, routes.WithGenerateOpts(d.generateOpts(f)...), routes.WithLogger(d.log))
	if err != nil {
		var de *routes.DefinitionError
		if errors.As(err, &de) {
			return f.wrap(de.Path, de.Err)
		}
		return f.wrap("", err)
	}
	for _, rt := range ra.Routes() {
		a.Routes = append(a.Routes, rt.ID())
	}
	var opts []session.SessionFlowOption[routes.State]
	for _, o := range snapshotOpts[routes.State](f, a) {
		opts = append(opts, o)
	}
	flow, err := recovered(func() *session.SessionFlow[routes.Status, routes.State] {
		return routes.DefineFlow(d.reg, f.Name, ra, opts...)
	})
	if err != nil {
		return f.wrap("name", err)
	}
	bind(d, a, flow)
	return nil
}

// toolRef is a tool an agent file names, and where.
type toolRef struct {
	path string // "tools[1]", "routes[0].steps[2].tool"
	name string
}

// tools returns the tools the file names: a prompt agent's tools, or the tools of a
// routed agent's domains, capabilities, guidelines and steps.
func (f *File) tools() []toolRef {
	var out []toolRef
	add := func(path string, names []string) {
		for i, name := range names {
			out = append(out, toolRef{fmt.Sprintf("%s[%d]", path, i), name})
		}
	}
	add("tools", f.Tools)
	guidelines := func(path string, gs []routes.GuidelineDef) {
		for i, g := range gs {
			add(fmt.Sprintf("%s[%d].tools", path, i), g.Tools)
		}
	}
	step := func(path string, s routes.StepDef) {
		if s.Tool != "" {
			out = append(out, toolRef{path + ".tool", s.Tool})
		}
		guidelines(path+".guidelines", s.Guidelines)
	}
	def := f.Definition
	guidelines("guidelines", def.Guidelines)
	for i, c := range def.Capabilities {
		add(fmt.Sprintf("capabilities[%d].tools", i), c.Tools)
	}
	for _, name := range slices.Sorted(maps.Keys(def.Domains)) {
		add("domains."+name, def.Domains[name])
	}
	for i, r := range def.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		guidelines(path+".guidelines", r.Guidelines)
		if r.InitialStep != nil {
			step(path+".initialStep", *r.InitialStep)
		}
		for j, s := range r.Steps {
			step(fmt.Sprintf("%s.steps[%d]", path, j), s)
		}
	}
	return out
}
