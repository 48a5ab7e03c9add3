package host

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/terrarium-ai/terrarium/abi"
	"github.com/terrarium-ai/terrarium/abi/plugin"
	"github.com/terrarium-ai/terrarium/agent"
	"github.com/terrarium-ai/terrarium/host/internal/engine"
)

// binding is what a call is bound to: the plugin, the session (nil outside a session
// flow), where streamed chunks go, and the HTTP responses the call opened. Host
// functions find it in their context, so one pool of instances serves every session
// without one call ever reaching another's session.
type binding struct {
	plugin *Plugin
	// ctx is the call's: its deadline and its caller's cancellation, which host
	// functions honour (the guest itself runs under a context that waits a little
	// for it to return; see guestContext). Set, or made by context from caller and
	// deadline when a host function first needs it: most calls call none.
	ctx      context.Context
	cancel   context.CancelFunc
	caller   context.Context
	deadline time.Time
	session  agent.AnySession
	// stream receives what the plugin streams: a chunk for models, a status for tools
	// and handlers. Nil: streaming goes nowhere.
	stream func(ctx context.Context, data []byte) error
	// guest is the context the guest runs under.
	guest guestContext
	// stalled is set when the caller did not take a chunk before the call's deadline.
	stalled bool
	http    httpState
}

// send hands data to the binding's stream and waits until the caller took it or the
// call's deadline passed: a caller that stops reading must not hold the instance past
// the call's timeout. One chunk is in flight at a time, so chunks keep their order.
// After a stall, the caller still holds the chunk it did not take; when it takes it,
// the call has already failed.
func (b *binding) send(ctx context.Context, data []byte) error {
	if b.stalled {
		return abi.Errorf(abi.CodeLimitExceeded, "the caller stopped taking streamed chunks")
	}
	taken := make(chan error, 1)
	go func() { taken <- b.stream(ctx, data) }()
	select {
	case err := <-taken:
		return err
	case <-ctx.Done():
		b.stalled = true
		return abi.Errorf(abi.CodeLimitExceeded, "the caller did not take a streamed chunk before the call's deadline")
	}
}

// context returns the call's context, b.ctx, making it if need be; nil for a binding
// of no call (a test's).
func (b *binding) context() context.Context {
	if b.ctx == nil && b.caller != nil {
		ctx, cancel := context.WithDeadlineCause(context.WithValue(b.caller, bindingKey{}, b), b.deadline, errTimedOut)
		b.ctx, b.cancel = ctx, cancel
		if calls := b.guest.calls; calls != nil {
			// An unload that ends the calls in flight ends their host functions too.
			stop := context.AfterFunc(calls, cancel)
			b.cancel = func() { stop(); cancel() }
		}
	}
	return b.ctx
}

// endContext releases the call's context, if context made one.
func (b *binding) endContext() {
	if b.cancel != nil {
		b.cancel()
	}
}

type bindingKey struct{}

// okEmpty is the result of a function that succeeded with nothing to hand back. The
// engines copy a result into the guest's memory, so one serves every call.
var okEmpty = []byte{plugin.ResultOK}

func ok(payload []byte) []byte {
	if len(payload) == 0 {
		return okEmpty
	}
	return append([]byte{plugin.ResultOK}, payload...)
}

func fail(code abi.ErrorCode, format string, args ...any) []byte {
	b, _ := json.Marshal(abi.Errorf(code, format, args...))
	return append([]byte{plugin.ResultError}, b...)
}

func failErr(err error) []byte {
	b, _ := json.Marshal(abi.AsError(err))
	return append([]byte{plugin.ResultError}, b...)
}

// hostFunc is one function of terrarium:host/v1: its name, its number of i64
// parameters, and its body, which returns the result block to hand back.
type hostFunc struct {
	name   string
	params int
	fn     func(ctx context.Context, c hostCall, args []uint64) []byte
	// quick marks a function that neither waits nor calls out: it runs under the
	// guest's context, which holds the binding, rather than the call's
	// (binding.context), which costs a timer and five allocations to make, more
	// than such a function costs in all.
	quick bool
}

// hostFuncs defines terrarium:host/v1. Each function reads its binding, checks the
// plugin's grant, and acts on the bound session only, under the call's context.
func (h *Host) hostFuncs() []engine.HostFunc {
	var funcs []engine.HostFunc
	for _, f := range h.hostFuncList() {
		fn, name, quick := f.fn, f.name, f.quick
		funcs = append(funcs, engine.HostFunc{Name: f.name, Params: f.params, Fn: func(ctx context.Context, c hostCall, args []uint64) []byte {
			b := bindingOf(ctx)
			if !quick {
				if bctx := b.context(); bctx != nil {
					ctx = bctx
				}
			}
			if h.observe != nil {
				h.observe(b.plugin.desc.Name, name)
			}
			return fn(ctx, c, args)
		}})
	}
	return funcs
}

func (h *Host) hostFuncList() []hostFunc {
	return []hostFunc{
		// A session's ID is a handle on the user's conversation (it names its
		// snapshots): it takes the same grant as reading the session.
		{name: plugin.FnSessionID, quick: true, fn: withSession(plugin.StateRead, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			return ok([]byte(b.session.ID()))
		})},
		{name: plugin.FnStateGet, params: 0, fn: withSession(plugin.StateRead, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			data, err := b.session.CustomJSON()
			if err != nil {
				return fail(abi.CodeInternal, "encoding the state: %v", err)
			}
			return ok(data)
		})},
		{name: plugin.FnStateSet, params: 1, fn: withSession(plugin.StateWrite, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			data, err := c.Read(args[0])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the state: %v", err)
			}
			if err := b.session.SetCustomJSON(data); err != nil {
				return fail(abi.CodeInvalidInput, "%v", err)
			}
			return ok(nil)
		})},
		{name: plugin.FnMessagesGet, params: 0, fn: withSession(plugin.StateRead, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			data, err := json.Marshal(b.session.Messages())
			if err != nil {
				return fail(abi.CodeInternal, "encoding the messages: %v", err)
			}
			return ok(data)
		})},
		{name: plugin.FnMessagesAppend, params: 1, fn: withSession(plugin.StateWrite, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			msgs, res := readMessages(c, args[0])
			if res != nil {
				return res
			}
			b.session.AddMessages(msgs...)
			return ok(nil)
		})},
		{name: plugin.FnMessagesSet, params: 1, fn: withSession(plugin.StateWrite, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			msgs, res := readMessages(c, args[0])
			if res != nil {
				return res
			}
			b.session.SetMessages(msgs)
			return ok(nil)
		})},
		{name: plugin.FnArtifactAdd, params: 1, fn: withSession(plugin.StateWrite, func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte {
			data, err := c.Read(args[0])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the artifact: %v", err)
			}
			var a abi.Artifact
			if err := json.Unmarshal(data, &a); err != nil {
				return fail(abi.CodeInvalidInput, "artifact: %v", err)
			}
			b.session.AddArtifact(&a)
			return ok(nil)
		})},
		{name: plugin.FnStream, params: 1, fn: func(ctx context.Context, c hostCall, args []uint64) []byte {
			b := bindingOf(ctx)
			data, err := c.Read(args[0])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the chunk: %v", err)
			}
			if len(data) > maxChunkBytes {
				return fail(abi.CodeLimitExceeded, "a chunk of %d bytes exceeds the limit of %d", len(data), maxChunkBytes)
			}
			if b.stream == nil {
				return ok(nil)
			}
			if err := b.send(ctx, data); err != nil {
				return failErr(err)
			}
			return ok(nil)
		}},
		{name: plugin.FnConfigGet, params: 1, quick: true, fn: func(ctx context.Context, c hostCall, args []uint64) []byte {
			b := bindingOf(ctx)
			key, err := c.Read(args[0])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the key: %v", err)
			}
			v, granted := b.plugin.manifest.Config[string(key)]
			if !granted {
				return fail(abi.CodePermissionDenied, "config key %q is not granted", key)
			}
			return ok([]byte(v))
		}},
		{name: plugin.FnSecretGet, params: 1, quick: true, fn: func(ctx context.Context, c hostCall, args []uint64) []byte {
			b := bindingOf(ctx)
			name, err := c.Read(args[0])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the name: %v", err)
			}
			s, granted := b.plugin.manifest.Secrets[string(name)]
			if !granted || !s.Readable {
				return fail(abi.CodePermissionDenied, "secret %q is not granted readable (secrets are meant for {{secret:NAME}} in HTTP headers)", name)
			}
			return ok([]byte(s.Value))
		}},
		{name: plugin.FnHTTPRequest, params: 2, fn: h.httpRequest},
		{name: plugin.FnHTTPRead, params: 2, fn: h.httpRead},
		{name: plugin.FnHTTPClose, params: 1, fn: h.httpClose},
		{name: plugin.FnLog, params: 2, quick: true, fn: func(ctx context.Context, c hostCall, args []uint64) []byte {
			b := bindingOf(ctx)
			msg, err := c.Read(args[1])
			if err != nil {
				return fail(abi.CodeInvalidInput, "reading the message: %v", err)
			}
			if b.caller != nil {
				ctx = b.caller // its values (a trace's span) are the logger's
			}
			b.plugin.logs.log(ctx, b.plugin.host.log, b, slog.Level(int64(args[0])), msg)
			return ok(nil)
		}},
	}
}

func bindingOf(ctx context.Context) *binding {
	b, _ := ctx.Value(bindingKey{}).(*binding)
	if b == nil {
		// Only a call through Plugin.call reaches a host function; anything else is a
		// bug in the host.
		panic("host: a host function ran outside a plugin call")
	}
	return b
}

// withSession guards a session function: the call must be bound to a session and the
// manifest must grant the access the function needs.
func withSession(need plugin.StateAccess, fn func(ctx context.Context, b *binding, c hostCall, args []uint64) []byte) func(context.Context, hostCall, []uint64) []byte {
	return func(ctx context.Context, c hostCall, args []uint64) []byte {
		b := bindingOf(ctx)
		if !b.plugin.manifest.State.Allows(need) {
			return fail(abi.CodePermissionDenied, "state access %q is not granted (the manifest grants %q)", need, b.plugin.manifest.State)
		}
		if b.session == nil {
			return fail(abi.CodeNoSession, "the call is not bound to a session")
		}
		return fn(ctx, b, c, args)
	}
}

func readMessages(c hostCall, off uint64) ([]*abi.Message, []byte) {
	data, err := c.Read(off)
	if err != nil {
		return nil, fail(abi.CodeInvalidInput, "reading the messages: %v", err)
	}
	var msgs []*abi.Message
	if err := json.Unmarshal(data, &msgs); err != nil {
		return nil, fail(abi.CodeInvalidInput, "messages: %v", err)
	}
	for i, m := range msgs {
		if m == nil {
			return nil, fail(abi.CodeInvalidInput, "messages[%d] is null", i)
		}
	}
	return msgs, nil
}
