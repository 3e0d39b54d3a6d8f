package lab

import (
	"os"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// markerEnv is set in the environment of every process a lab starts, to
// its prefix: `down` finds them by it even when up was killed before
// recording them.
const markerEnv = "TABBY_LAB_ID"

// procs starts the lab's processes (lab/internal/harness).
func (l *Lab) procs() harness.Procs {
	return harness.Procs{Dir: l.Dir, Marker: markerEnv, ID: l.State.Prefix}
}

// spawn starts a long-running process of the lab, detached (it outlives
// `tabby-lab up`), logging to <dir>/logs/<name>.log, inside network
// namespace netns when not "". It returns at once.
func (l *Lab) spawn(name, netns string, env []string, argv ...string) (*os.Process, error) {
	return l.spawnWD(l.Dir, name, netns, env, argv...)
}

// spawnWD is spawn with working folder wd.
func (l *Lab) spawnWD(wd, name, netns string, env []string, argv ...string) (*os.Process, error) {
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + netnsPath(netns), "--"}, argv...)
	}
	return l.procs().Spawn(wd, name, env, argv...)
}

// logTail is the end of a process's log, for error messages.
func (l *Lab) logTail(name string) string { return l.procs().LogTail(name, 2000) }

// markedProcesses lists the processes whose environment carries the lab's
// marker.
func markedProcesses(prefix string) []int { return harness.Marked(markerEnv, prefix) }
