package bird

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Control is what the driver needs from BIRD.
type Control interface {
	// Validate parses the configuration file at path without running it
	// (`bird -p -c path`). A rejected file yields BIRD's message.
	Validate(ctx context.Context, path string) error
	// Configure makes the running daemon re-read its configuration file
	// (`birdc configure`).
	Configure(ctx context.Context) error
}

// ErrInvalidConfig is wrapped by every *ConfigError.
var ErrInvalidConfig = errors.New("BIRD rejected the configuration")

// ConfigError is a configuration BIRD refused; the old one is still live.
type ConfigError struct {
	Stage   string // "validate" or "configure"
	Message string // BIRD's output, e.g. "/etc/bird.conf:12:3 syntax error ..."
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("BIRD rejected the configuration at %s, the previous one stays in use: %s", e.Stage, e.Message)
}

func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Driver owns one BIRD configuration file. Apply may be called from several
// goroutines; calls are serialised.
type Driver struct {
	path string // absolute path BIRD was started with (-c)
	ctl  Control

	mu      sync.Mutex
	applied []byte // last text BIRD accepted, nil before the first Apply
}

// NewDriver returns a driver for the configuration file at path (made
// absolute: BIRD resolves relative paths against its own working directory).
func NewDriver(path string, ctl Control) (*Driver, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("bird config path %q: %w", path, err)
	}
	return &Driver{path: abs, ctl: ctl}, nil
}

// Path is the live configuration file.
func (d *Driver) Path() string { return d.path }

// Apply makes text BIRD's running configuration. It does nothing when text
// equals the last applied one. On any failure the live file and BIRD's
// running configuration are unchanged.
func (d *Driver) Apply(ctx context.Context, text string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	data := []byte(text)
	if d.applied != nil && bytes.Equal(d.applied, data) {
		return nil
	}
	candidate := d.path + ".new"
	if err := writeFileSync(candidate, data); err != nil {
		return fmt.Errorf("writing candidate BIRD config: %w", err)
	}
	defer os.Remove(candidate) // no-op once renamed
	if err := d.ctl.Validate(ctx, candidate); err != nil {
		return err
	}
	old, err := os.ReadFile(d.path)
	hadOld := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading live BIRD config: %w", err)
	}
	if err := os.Rename(candidate, d.path); err != nil {
		return fmt.Errorf("swapping in BIRD config: %w", err)
	}
	if err := d.ctl.Configure(ctx); err != nil {
		if hadOld {
			if rerr := restore(d.path, old); rerr != nil {
				return errors.Join(err, fmt.Errorf("restoring previous BIRD config: %w", rerr))
			}
		}
		return err
	}
	d.applied = data
	return nil
}

func restore(path string, old []byte) error {
	tmp := path + ".restore"
	if err := writeFileSync(tmp, old); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeFileSync writes and fsyncs a file so a crash never leaves a torn
// config behind the rename.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
