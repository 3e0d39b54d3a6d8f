package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// markerEnv is set, to the cluster's prefix, in the environment of every
// process the cluster starts: Down finds them by it even when Up was
// killed before recording them.
const markerEnv = "TABBY_CLUSTER_ID"

// procs starts the cluster's processes (lab/internal/harness).
func (c *Cluster) procs() harness.Procs {
	return harness.Procs{Dir: c.Dir, Marker: markerEnv, ID: c.State.Prefix}
}

// spawn starts a long-running process of the cluster, detached (it
// outlives Up), logging to <state>/logs/<name>.log. It returns at once.
func (c *Cluster) spawn(name string, argv ...string) (*os.Process, error) {
	return c.procs().Spawn(c.Dir, name, nil, argv...)
}

// logTail is the end of a process's log, for error messages.
func (c *Cluster) logTail(name string) string { return c.procs().LogTail(name, 3000) }

// run runs a short command and returns its output, or an error with it.
func run(argv ...string) (string, error) {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// markedProcesses lists the processes whose environment carries marker
// prefix.
func markedProcesses(prefix string) []int { return harness.Marked(markerEnv, prefix) }
