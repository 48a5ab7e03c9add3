package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/internal/schema"
)

// WithLenientOutputs makes a tool output that does not match the tool's output schema
// a logged warning instead of a failed call. Outputs that are not a tool output
// envelope at all still fail: there is nothing to pass on.
func WithLenientOutputs() Option { return optionFunc(func(c *hostConfig) { c.lenientOutputs = true }) }

// toolOutput decodes a tool's answer and checks its output against the tool's output
// schema, before it reaches the model: the schema is the tool's promise to whoever
// reads the output. A mismatch is the plugin's fault, naming the tool and where the
// output breaks the schema; with WithLenientOutputs it is only logged.
func (t *pluginTool) toolOutput(out []byte) (*plugin.ToolOutput, error) {
	p := t.p
	fault := func(format string, args ...any) error {
		return &CallError{Plugin: p.desc.Name, Export: plugin.ExportCallTool,
			Err: fmt.Errorf("%w: tool %s: %s", ErrPluginFault, t.local, fmt.Sprintf(format, args...))}
	}
	var res plugin.ToolOutput
	if err := decodeEnvelope(out, &res); err != nil {
		return nil, fault(`invalid output: not a tool output envelope ({"output": ..., "content": [...]} or {"interrupt": {...}}): %v (answer: %s)`, err, abbreviate(string(out)))
	}
	if res.Interrupt != nil {
		return &res, nil
	}
	if err := t.output.Validate(res.Output); err != nil {
		if p.host.lenientOutputs {
			p.host.log.Warn("tool output does not match its output schema", "plugin", p.desc.Name, "tool", t.local, "error", err)
			return &res, nil
		}
		return nil, fault("the output does not match the output schema: %v", err)
	}
	return &res, nil
}

// envelopeDecoder decodes tool output envelopes strictly: a field the envelope does not
// have is refused, which only a json.Decoder does. A new decoder cost eight
// allocations and about 1 KB a call (itself, its reader and buffer, the stacks its
// scanner and decoder grow), more garbage than a small output's, so one is reused
// from call to call.
type envelopeDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

// maxPooledEnvelope is the largest answer whose decoder goes back to the pool: the
// decoder keeps a buffer as large as the answer it read.
const maxPooledEnvelope = 64 << 10

var envelopeDecoders = sync.Pool{New: func() any {
	d := new(envelopeDecoder)
	d.dec = json.NewDecoder(&d.r)
	d.dec.DisallowUnknownFields()
	return d
}}

// decodeEnvelope decodes the answer out into res as a fresh json.Decoder with
// DisallowUnknownFields does: the first JSON value in out, anything after it ignored.
func decodeEnvelope(out []byte, res *plugin.ToolOutput) error {
	d := envelopeDecoders.Get().(*envelopeDecoder)
	d.r.Reset(out)
	start := d.dec.InputOffset()
	err := d.dec.Decode(res)
	// A decoder is reused only if it holds nothing of this answer: one that failed
	// keeps its error, and one that stopped before the answer's end would hand what
	// follows to the next call's.
	if err == nil && d.r.Len() == 0 && d.dec.InputOffset()-start == int64(len(out)) && len(out) <= maxPooledEnvelope {
		envelopeDecoders.Put(d)
	}
	return err
}

// compileOutputSchemas compiles the output schema of each of p's tools once, at load:
// finding it again for each call in schema.Compile's cache, which walks and encodes
// the schema to look it up, cost more than validating a small output (BENCHMARKS.md).
func (p *Plugin) compileOutputSchemas() error {
	p.outputs = map[string]*schema.Validator{}
	for _, td := range p.desc.Tools {
		v, err := schema.Compile(td.OutputSchema)
		if err != nil {
			return fmt.Errorf("tool %q: output schema: %w", td.Name, err)
		}
		p.outputs[td.Name] = v
	}
	return nil
}
