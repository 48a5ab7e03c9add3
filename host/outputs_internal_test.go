package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/terrarium-ai/terrarium/abi/plugin"
)

// TestDecodeEnvelopeLikeAFreshDecoder: the reused envelope decoders answer every
// answer as a new json.Decoder would, whatever the answers before it were: a failed
// decoder, or one that stopped before its answer's end, is not reused.
func TestDecodeEnvelopeLikeAFreshDecoder(t *testing.T) {
	answers := []string{
		`{"output":{"result":1}}`,
		`{"output":1,"value":2}`,
		`{"output":`,
		`{"output":2} {"output":3}`,
		`{"output":4}  `,
		`{"output":"x"} trailing`,
		`{"interrupt":{"ask":"why"}}`,
		`[1]`,
		`{"output":5}`,
		``,
		`{"content":[{"text":"hi"}]}`,
	}
	for range 3 {
		for _, a := range answers {
			var got, want plugin.ToolOutput
			gotErr := decodeEnvelope([]byte(a), &got)
			dec := json.NewDecoder(bytes.NewReader([]byte(a)))
			dec.DisallowUnknownFields()
			wantErr := dec.Decode(&want)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("answer %q: decoded %+v, %v; want %+v, %v", a, got, gotErr, want, wantErr)
			}
		}
	}
}
