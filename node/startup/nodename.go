package startup

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteNodename writes the node name to path (atomically: the CNI plugin
// may read it at any time), creating its directory.
func WriteNodename(path, name string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the node name file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(name), 0o644); err != nil {
		return fmt.Errorf("writing the node name file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the node name file: %w", err)
	}
	return nil
}
