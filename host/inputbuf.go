package host

import (
	"bytes"
	"encoding/json"
	"sync"
)

// inputBuffer is where the host encodes a call's input. The engines copy an input into
// the guest's memory and keep none of it, so one buffer serves call after call, and
// encoding an input makes no copy of it for the call.
type inputBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledInput is the largest buffer given back to the pool. One that grew for a MiB
// of input is kept: growing a fresh buffer to a MiB costs as much again as encoding
// into it, and the pool lets go of what calls stop using within two collections. A
// larger one is left to the collector rather than held for every call.
const maxPooledInput = 4 << 20

var inputBuffers = sync.Pool{New: func() any {
	in := new(inputBuffer)
	in.enc = json.NewEncoder(&in.buf)
	return in
}}

// newInputBuffer returns a buffer from the pool; release gives it back.
func newInputBuffer() *inputBuffer { return inputBuffers.Get().(*inputBuffer) }

// encode encodes v as json.Marshal does. The bytes are the buffer's: valid until the
// next encode or release.
func (in *inputBuffer) encode(v any) ([]byte, error) {
	in.buf.Reset()
	if err := in.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(in.buf.Bytes(), []byte("\n")), nil // Encode ends a value with a newline; Marshal does not
}

// release gives the buffer back to the pool; the bytes encode returned are no longer
// the caller's.
func (in *inputBuffer) release() {
	if in.buf.Cap() > maxPooledInput {
		return
	}
	inputBuffers.Put(in)
}
