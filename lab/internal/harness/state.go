package harness

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// NewPrefix is kind (two letters) and 6 random hex digits: short enough
// for interface and namespace names, unique enough for several instances.
func NewPrefix(kind string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return kind + hex.EncodeToString(b[:])
}

// SaveJSON writes v as indented JSON to dir/file atomically (a crash
// leaves the old or the new file).
func SaveJSON(dir, file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, file+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, file))
}

// LoadJSON reads dir/file into v; a missing file is an error wrapping
// fs.ErrNotExist.
func LoadJSON(dir, file string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// Files of a state folder.
const (
	PrefixFile = "prefix"     // the instance's prefix, written before anything is created
	StateFile  = "state.json" // the instance's state, rewritten after every step
)
