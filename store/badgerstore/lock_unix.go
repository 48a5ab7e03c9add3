//go:build !windows && !plan9 && !js && !wasip1 && !aix

package badgerstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes the lock Badger takes on its directory (flock on the directory
// itself), so that nothing changes the tables while verifyTables reads them. Badger
// takes it again when it opens, once unlock has released it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %q: another process is using it: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
