// Package birdtest helps tests that drive BIRD: Fake is a scriptable
// bird.Control for unit tests; StartBIRD, Bridge, Attach and Pod run real
// BIRDs in network namespaces for privileged tests.
package birdtest

import (
	"context"
	"os"
	"sync"

	"github.com/tabbynet/tabby/confd/bird"
)

// Fake records calls and fails on demand. Running holds the text of the file
// the last successful Configure read, as a real BIRD would run it.
type Fake struct {
	mu sync.Mutex
	// ConfigPath is the live file Configure reads.
	ConfigPath string
	// ValidateErr / ConfigureErr, when set, are returned (once each call).
	ValidateErr  error
	ConfigureErr error

	Validated []string // texts passed to Validate
	Running   string
	Calls     []string
}

func (f *Fake) Validate(_ context.Context, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.Calls = append(f.Calls, "validate")
	f.Validated = append(f.Validated, string(b))
	return f.ValidateErr
}

func (f *Fake) Configure(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "configure")
	if f.ConfigureErr != nil {
		return f.ConfigureErr
	}
	b, err := os.ReadFile(f.ConfigPath)
	if err != nil {
		return err
	}
	f.Running = string(b)
	return nil
}

var _ bird.Control = (*Fake)(nil)
