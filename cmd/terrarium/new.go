package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"text/template"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host"
	"github.com/terrarium-ai/terrarium/host/pluginbuild"
)

//go:embed scaffold
var scaffold embed.FS

// terrariumModule is the module a scaffolded plugin requires.
const terrariumModule = "github.com/terrarium-ai/terrarium"

// scaffoldData fills the scaffold's templates.
type scaffoldData struct {
	Name, Module, GoVersion, Version, Replace string
	State                                     string // the plugin.StateAccess constant its test grants
}

// pluginNew writes a new plugin project that builds and conforms as generated.
func pluginNew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin new", flag.ContinueOnError)
	lang := fs.String("lang", "go", "the plugin's language: go")
	model := fs.Bool("model", false, "a plugin serving a model")
	handler := fs.Bool("handler", false, "a plugin with a handler keeping state")
	fs.Bool("tool", false, "a plugin with a tool (the default)")
	dir := fs.String("dir", "", "write the project here (default ./<name>); it must not exist or be empty")
	module := fs.String("module", "", "the project's Go module path (default example.com/<name>)")
	replace := fs.String("replace", "", "use the Terrarium checkout in this directory (a replace directive in go.mod)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin new <name> [--lang go] [--tool | --model | --handler] [flags]\n\nWrites a plugin project: the plugin, a test running the conformance suite on it, and go.mod\n(then runs go mod tidy). Build it with terrarium plugin build, check it with go test.")
		fs.PrintDefaults()
	}
	name, ok := parse(fs, args, stderr)
	if !ok {
		return exitUsage
	}
	usageErr := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "terrarium plugin new: "+format+"\n", args...)
		return exitUsage
	}
	if *lang != "go" {
		return usageErr("--lang %q: only go can be scaffolded (see docs/plugins.md for other languages)", *lang)
	}
	if *model && *handler {
		return usageErr("give one of --tool, --model and --handler")
	}
	if problems := host.DescriptorProblems(&plugin.Descriptor{ABI: plugin.Version, Name: name}); len(problems) > 0 {
		return usageErr("%s", problems[0].Message)
	}
	kind, state := "tool", "StateNone"
	switch {
	case *model:
		kind = "model"
	case *handler:
		kind, state = "handler", "StateWrite"
	}
	data := scaffoldData{Name: name, Module: *module, GoVersion: goVersion(), Version: terrariumVersion(), State: state}
	if data.Module == "" {
		data.Module = "example.com/" + name
	}
	if *replace != "" {
		abs, err := filepath.Abs(*replace)
		if err != nil {
			return usageErr("--replace: %v", err)
		}
		if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
			return usageErr("--replace %s: not a Terrarium checkout: %v", *replace, err)
		}
		data.Replace = abs
	} else if data.Version == "v0.0.0" {
		return usageErr("this terrarium is a development build, with no published version to require: give --replace <your Terrarium checkout>")
	}
	if *dir == "" {
		*dir = name
	}
	if err := writeScaffold(*dir, kind, data); err != nil {
		fmt.Fprintf(stderr, "terrarium plugin new: %v\n", err)
		return exitFailed
	}
	tidy := exec.CommandContext(ctx, pluginbuild.GoCommand(), "mod", "tidy")
	tidy.Dir = *dir
	if out, err := tidy.CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "terrarium plugin new: the project is in %s, but go mod tidy failed: %v\n%s", *dir, err, bytes.TrimSpace(out))
		return exitFailed
	}
	fmt.Fprintf(stderr, "a %s plugin in %s: build it with `terrarium plugin build %s`, check it with `go test` there\n", kind, *dir, *dir)
	fmt.Fprintln(stdout, *dir)
	return exitOK
}

// writeScaffold writes the project of a plugin of kind into dir, which must not exist
// or be empty.
func writeScaffold(dir, kind string, data scaffoldData) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for out, tmpl := range map[string]string{
		"main.go":      kind + ".go.tmpl",
		"main_test.go": "main_test.go.tmpl",
		"go.mod":       "go.mod.tmpl",
	} {
		t, err := template.ParseFS(scaffold, "scaffold/go/"+tmpl)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return fmt.Errorf("%s: %w", tmpl, err)
		}
		if err := os.WriteFile(filepath.Join(dir, out), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// terrariumVersion is the version of Terrarium this command was built from, for the
// scaffold's go.mod: v0.0.0 for a development build.
func terrariumVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "v0.0.0"
	}
	// A published version, not "(devel)" nor a build of a modified checkout ("+dirty").
	published := func(v string) bool { return strings.HasPrefix(v, "v") && !strings.Contains(v, "+") }
	if bi.Main.Path == terrariumModule && published(bi.Main.Version) {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == terrariumModule && published(d.Version) {
			return d.Version
		}
	}
	return "v0.0.0"
}

// goVersion is the go directive of a scaffolded go.mod: the Go release this command
// was built with, which is at least the one Terrarium needs.
func goVersion() string {
	if v := runtime.Version(); version.IsValid(v) {
		return strings.TrimPrefix(v, "go")
	}
	return "1.26"
}
