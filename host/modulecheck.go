package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
	"github.com/terrarium-ai/terrarium/host/internal/instrument"
)

// kernelModule is the import module of the Extism kernel.
const kernelModule = "extism:host/env"

// kernelFuncs are the Extism kernel functions a plugin may import (ABI.md, section 1).
// The kernel has more (http_request, config_get, var_get, log_info...): Terrarium
// serves those needs through terrarium:host/v1, under the manifest's grants, and
// refuses a module importing them rather than let them fail or answer nothing at run
// time.
var kernelFuncs = []string{
	"input_length", "input_load_u8", "input_load_u64", "alloc", "free", "length",
	"length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64", "output_set",
	"error_set",
}

// importModules are the modules a plugin may import from (ABI.md, section 1).
var importModules = []string{kernelModule, engine.HostModule, wasi_snapshot_preview1.ModuleName}

// ErrNotAPlugin is wrapped by the error of a module that cannot be a Terrarium
// plugin whatever it says: a command module, one importing what no host provides
// (refused kernel functions, other modules, its memory), one not exporting
// terrarium_describe. CheckModule says which.
var ErrNotAPlugin = errors.New("not a Terrarium plugin")

// CheckModule checks a module's interface, from its binary and without running it:
// it must be a reactor (no _start: a command module runs its main and exits when
// instantiated), export terrarium_describe, import functions only from the kernel,
// the host and WASI, no Extism kernel function outside ABI.md's list, and nothing but
// functions (not its memory, which it defines itself, exported or not). It is what
// Load checks first and `terrarium plugin build` checks after building; its error
// says how to fix what is wrong. Both engines rely on it: Extism's would otherwise
// fail such a module only when instantiating it, with "module[env] not instantiated".
func CheckModule(wasm []byte) error {
	imports, exports, err := instrument.Interface(wasm)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotAPlugin, err)
	}
	var problems []string
	if slices.Contains(exports, "_start") {
		problems = append(problems, "it is a command module (it exports _start), which runs its main and exits when instantiated: "+
			"build a reactor (Go: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, as terrarium plugin build does; "+
			"Rust: --crate-type cdylib; C: -Wl,--no-entry without a main)")
	}
	if !slices.Contains(exports, plugin.ExportDescribe) {
		problems = append(problems, "it does not export "+plugin.ExportDescribe)
	}
	var refused, foreign, others []string
	for _, imp := range imports {
		switch {
		case imp.Kind == instrument.KindMemory:
			problems = append(problems, fmt.Sprintf("it imports its memory (%s): a plugin defines its own, exported or not "+
				"(C, Rust: link without -Wl,--import-memory)", imp))
		case imp.Kind != instrument.KindFunc:
			others = append(others, fmt.Sprintf("a %s (%s)", imp.Kind, imp))
		case !slices.Contains(importModules, imp.Module):
			foreign = append(foreign, imp.String())
		case imp.Module == kernelModule && !slices.Contains(kernelFuncs, imp.Name):
			refused = append(refused, imp.Name)
		}
	}
	if len(refused) > 0 {
		problems = append(problems, fmt.Sprintf("it imports Extism kernel functions Terrarium does not provide (%s): "+
			"use terrarium:host/v1 instead (http_request, config_get, log; ABI.md, section 3)", strings.Join(refused, ", ")))
	}
	if len(foreign) > 0 {
		problems = append(problems, fmt.Sprintf("it imports functions from modules no host provides (%s): "+
			"a plugin imports only from %s (a C function declared but not defined becomes an import from env: define it)",
			strings.Join(foreign, ", "), strings.Join(importModules, ", ")))
	}
	if len(others) > 0 {
		problems = append(problems, fmt.Sprintf("it imports %s, which no host provides", strings.Join(others, ", ")))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotAPlugin, strings.Join(problems, "; "))
	}
	return nil
}
