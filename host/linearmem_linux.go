package host

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memfd returns a file in memory holding data, zero-padded to whole pages (a mapping
// past its end would fault), and sealed: nothing can write to it, or change its size,
// once the memories of instances map it. It also returns the file mapped shared and
// read-only, unmapped once the file is unreachable.
func memfd(data []byte) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate("terrarium-data", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a memory file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "terrarium-data")
	fail := func(what string, err error) (*os.File, []byte, error) {
		f.Close()
		return nil, nil, fmt.Errorf("%s the memory file: %w", what, err)
	}
	page := os.Getpagesize()
	size := (len(data) + page - 1) / page * page
	if _, err := f.Write(data); err != nil {
		return fail("writing", err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fail("sizing", err)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		return fail("sealing", err)
	}
	view, err := mapReadOnly(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, view, nil
}
