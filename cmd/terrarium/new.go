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
	"io/fs"
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

// The C and Rust scaffolds are the example plugins, copied here to be embedded; a
// test keeps the copies the same.
//go:generate cp ../../examples/plugins-c/adder/plugin.c scaffold/c/plugin.c
//go:generate cp ../../examples/plugins-rust/lib.rs scaffold/rust/lib.rs

//go:embed scaffold
var scaffold embed.FS

// exampleNames are the plugin names of the example plugins the C and Rust scaffolds
// are, replaced by the new plugin's name.
var exampleNames = map[string]string{"c": "adder-c", "rust": "adder-rust"}

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
	lang := fs.String("lang", "go", "the plugin's language: go, c or rust (a tool plugin without SDK or dependencies)")
	model := fs.Bool("model", false, "a plugin serving a model")
	handler := fs.Bool("handler", false, "a plugin with a handler keeping state")
	fs.Bool("tool", false, "a plugin with a tool (the default)")
	dir := fs.String("dir", "", "write the project here (default ./<name>); it must not exist or be empty")
	module := fs.String("module", "", "the project's Go module path (default example.com/<name>)")
	replace := fs.String("replace", "", "use the Terrarium checkout in this directory (a replace directive in go.mod)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: terrarium plugin new <name> [--lang go|c|rust] [--tool | --model | --handler] [flags]\n\nWrites a plugin project. In Go: the plugin, a test running the conformance suite on it, and\ngo.mod (then runs go mod tidy); build it with terrarium plugin build, check it with go test.\nIn C or Rust: a tool plugin written on the Extism kernel alone, whose first lines say how\nto build it; check the .wasm with terrarium plugin test.")
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
	if *model && *handler {
		return usageErr("give one of --tool, --model and --handler")
	}
	if problems := host.DescriptorProblems(&plugin.Descriptor{ABI: plugin.Version, Name: name}); len(problems) > 0 {
		return usageErr("%s", problems[0].Message)
	}
	switch *lang {
	case "go":
	case "c", "rust":
		if *model || *handler {
			return usageErr("--lang %s scaffolds a tool plugin only", *lang)
		}
		if *dir == "" {
			*dir = name
		}
		if err := writeExample(*dir, *lang, name); err != nil {
			fmt.Fprintf(stderr, "terrarium plugin new: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stderr, "a %s tool plugin in %s: its first lines say how to build it; check the .wasm with terrarium plugin test\n", *lang, *dir)
		fmt.Fprintln(stdout, *dir)
		return exitOK
	default:
		return usageErr("--lang %q: want go, c or rust", *lang)
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

// writeExample writes the example plugin of lang into dir, which must not exist or be
// empty, under the plugin name name.
func writeExample(dir, lang, name string) error {
	if err := emptyDir(dir); err != nil {
		return err
	}
	files, err := fs.ReadDir(scaffold, "scaffold/"+lang)
	if err != nil {
		return err
	}
	for _, f := range files {
		src, err := fs.ReadFile(scaffold, "scaffold/"+lang+"/"+f.Name())
		if err != nil {
			return err
		}
		// The name appears in quotes (the descriptor) and in the first comment.
		out := strings.ReplaceAll(string(src), exampleNames[lang], name)
		if err := os.WriteFile(filepath.Join(dir, f.Name()), []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// emptyDir makes dir, which must not exist or be empty.
func emptyDir(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

// writeScaffold writes the project of a plugin of kind into dir, which must not exist
// or be empty.
func writeScaffold(dir, kind string, data scaffoldData) error {
	if err := emptyDir(dir); err != nil {
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
