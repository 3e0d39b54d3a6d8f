package dataplane

import "context"

// Runner runs one command with stdin and returns its stdout. An error
// should include the command's stderr.
type Runner interface {
	Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error)
}
