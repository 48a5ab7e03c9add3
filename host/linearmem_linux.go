package host

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memfd returns a file in memory holding data, zero-padded to whole pages (a mapping
// past its end would fault), and sealed: nothing can write to it, or change its size,
// once the memories of instances map it.
func memfd(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("terrarium-data", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("creating a memory file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "terrarium-data")
	page := os.Getpagesize()
	size := (len(data) + page - 1) / page * page
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the memory file: %w", err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("sizing the memory file: %w", err)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the memory file: %w", err)
	}
	return f, nil
}
