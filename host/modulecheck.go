package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/terrarium-ai/terrarium/abi/plugin"
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

// ErrNotAPlugin is wrapped by the error of a module that cannot be a Terrarium
// plugin whatever it says: a command module, one importing kernel functions the host
// refuses, one not exporting terrarium_describe. CheckModule says which.
var ErrNotAPlugin = errors.New("not a Terrarium plugin")

// CheckModule checks a module's interface, from its binary and without running it:
// it must be a reactor (no _start: a command module runs its main and exits when
// instantiated), export terrarium_describe, and import no Extism kernel function
// outside ABI.md's list. It is what Load checks first and `terrarium plugin build`
// checks after building; its error says how to fix what is wrong.
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
	var refused []string
	for _, imp := range imports {
		if name, ok := strings.CutPrefix(imp, kernelModule+"."); ok && !slices.Contains(kernelFuncs, name) {
			refused = append(refused, name)
		}
	}
	if len(refused) > 0 {
		problems = append(problems, fmt.Sprintf("it imports Extism kernel functions Terrarium does not provide (%s): "+
			"use terrarium:host/v1 instead (http_request, config_get, log; ABI.md, section 3)", strings.Join(refused, ", ")))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotAPlugin, strings.Join(problems, "; "))
	}
	return nil
}
