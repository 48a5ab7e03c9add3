package host_test

// The sandbox's last leaks (issue 34, items 7 and 8): what a plugin could read that it
// was never given.

import (
	"context"
	"strings"
	"testing"

	"github.com/terrarium-ai/terrarium/host"
)

// Item 7: a pooled instance's call reads nothing of the call before it through the
// kernel: not past its own input, not in the blocks it allocates. On the native
// engine it reads nothing at all it was not given; Extism's reads past its input with
// input_load_u64 (its go-sdk bounds only input_load_u8), but only what the call itself
// put in its later blocks, the earlier calls' having been zeroed.
func TestNoResidueOfTheCallBefore(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			_, r, _ := misbehaving(t, host.Manifest{MaxInstances: 1}, host.WithEngine(e.engine))
			ctx := context.Background()
			// Large enough to fill the blocks snoop allocates and reads past its
			// input, in the one instance both calls get.
			before := strings.Repeat("the call before's input. ", 1500)
			if out, err := runWith(ctx, r, "misbehave/ok", map[string]any{"text": before}); out != "fine" {
				t.Fatalf("the call before: %v, %v", out, err)
			}
			out, err := runWith(ctx, r, "misbehave/snoop", map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			seen, _ := out.(string)
			if strings.Contains(seen, "before") {
				t.Errorf("a call read the input of the call before: %.120q", seen)
			}
			if e.name == "native" && seen != "" {
				t.Errorf("a call read %d bytes it was not given (past its input, in its new blocks): %.120q", len(seen), seen)
			}
		})
	}
}
