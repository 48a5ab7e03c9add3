package conformance

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// hostCalls records the host functions a plugin calls during the checks: the
// suite's host is a recording host.
type hostCalls struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *hostCalls) note(_, function string) {
	c.mu.Lock()
	c.seen[function] = true
	c.mu.Unlock()
}

func (c *hostCalls) called() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for f := range c.seen {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// needs is the capability a host function needs, as a descriptor declares it; none
// for the functions every plugin may call (log, stream).
func needs(function string) (capability string, state plugin.StateAccess) {
	switch function {
	case plugin.FnSessionID, plugin.FnStateGet, plugin.FnMessagesGet:
		return "state", plugin.StateRead
	case plugin.FnStateSet, plugin.FnMessagesAppend, plugin.FnMessagesSet, plugin.FnArtifactAdd:
		return "state", plugin.StateWrite
	case plugin.FnHTTPRequest, plugin.FnHTTPRead, plugin.FnHTTPClose:
		return "http", ""
	case plugin.FnConfigGet:
		return "config", ""
	case plugin.FnSecretGet:
		return "secrets", ""
	}
	return "", ""
}

// checkCapabilities fails when the plugin called host functions its descriptor does
// not declare the capability for: an operator granting what it declares would see
// those calls denied in production.
func (s *suite) checkCapabilities() {
	called := s.calls.called()
	c := s.desc.Capabilities
	var undeclared []string
	for _, f := range called {
		capability, state := needs(f)
		var declared bool
		switch capability {
		case "":
			declared = true
		case "state":
			declared = c.State.Allows(state)
		case "http":
			declared = len(c.HTTP) > 0
		case "config":
			declared = len(c.Config) > 0
		case "secrets":
			declared = len(c.Secrets) > 0 // secret_get reads one the plugin named
		}
		if !declared {
			what := capability
			if state != "" {
				what = fmt.Sprintf("state %s", state)
			}
			undeclared = append(undeclared, fmt.Sprintf("called %s, which needs %s", f, what))
		}
	}
	switch {
	case len(undeclared) > 0:
		s.record("capabilities: declared", Fail, 0, "the plugin %s, but its descriptor does not declare it (capabilities in terrarium_describe; sdk.Info.Capabilities in Go)",
			strings.Join(undeclared, "; "))
	case len(called) == 0:
		s.record("capabilities: declared", Pass, 0, "called no host function")
	default:
		s.record("capabilities: declared", Pass, 0, "called %s", strings.Join(called, ", "))
	}
}
