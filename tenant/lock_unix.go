//go:build unix

package tenant

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait bounds the wait for another process's lock of the keys file, which it
// holds for one read and one write.
const lockWait = 10 * time.Second

// lockFile takes an exclusive lock on the file at path (made if need be), waiting up
// to lockWait for another process holding it, and returns what releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("%s is held by another process for more than %v", path, lockWait)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.Close()
	return nil, err
}
