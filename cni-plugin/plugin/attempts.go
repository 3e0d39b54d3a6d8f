package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
)

// An ADD asks the datastore for what its IPAM handle already holds only
// when an ADD for the same attachment may have written it before: a
// repeated ADD (the runtime called again, or an ADD killed half-way and
// retried) gets those addresses back, as calico-ipam gives them. Nearly
// every ADD is the first for its container, and that read is a round trip
// to the datastore before any write. So each ADD leaves a mark in the hint
// folder (attempts/<digest of the handle>) before its first IPAM write,
// and the next ADD of the attachment finds it and reads the handle; DEL,
// an ADD's rollback and GC remove it once the handle's addresses are
// released. Without a usable folder every ADD reads the handle. When the
// mark is lost while a handle holds addresses (the folder wiped), the ADD
// that creates the handle finds it taken and adds its addresses to it
// (ipam's usual path): the pod holds one more address until its DEL; no
// address is ever given twice.

// attempts are the marks in dir ("" none).
type attempts struct{ dir string }

func attemptsIn(hintDir string) attempts {
	if hintDir == "" {
		return attempts{}
	}
	return attempts{dir: filepath.Join(hintDir, "attempts")}
}

func (a attempts) path(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(a.dir, hex.EncodeToString(sum[:16]))
}

// mayHold reports whether handle may hold addresses already: false only
// when the folder is there and holds no mark for it.
func (a attempts) mayHold(handle string) bool {
	if a.dir == "" {
		return true
	}
	if _, err := os.Stat(a.dir); err != nil {
		return true
	}
	_, err := os.Lstat(a.path(handle))
	return !errors.Is(err, os.ErrNotExist)
}

// start marks handle before its first write.
func (a attempts) start(handle string) error {
	if a.dir == "" {
		return nil
	}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(a.path(handle), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// done removes handle's mark once its addresses are released.
func (a attempts) done(handle string) {
	if a.dir != "" {
		_ = os.Remove(a.path(handle))
	}
}
