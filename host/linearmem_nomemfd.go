//go:build !linux

package host

import (
	"errors"
	"os"
)

// memfd fails: only linux has files in memory to map. A module's data is copied into
// each instance's memory instead.
func memfd([]byte) (*os.File, []byte, error) {
	return nil, nil, errors.New("no memory files on this system")
}
