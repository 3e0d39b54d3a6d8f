package commands

import (
	"os"
	"path/filepath"
	"strings"
)

// Which node-agent processes run, as Calico's `calicoctl node status`
// checks before asking BIRD: the agent (calico-node, which runs felix
// in-process in Tabby; `calico-node -felix` or calico-felix in Calico; a
// stand-alone felix) and BIRD.

// processList returns the command line (argv) of each running process;
// tests replace app.procs.
type processList func() [][]string

func runningProcesses() [][]string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out [][]string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		out = append(out, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
	}
	return out
}

func procName(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return filepath.Base(argv[0])
}

// agentRunning: a calico-node, calico-felix or felix process.
func agentRunning(procs [][]string) bool {
	for _, p := range procs {
		switch procName(p) {
		case "calico-node", "calico-felix", "felix":
			return true
		}
	}
	return false
}

// birdRunning: a bird (or Calico's older bird6) process.
func birdRunning(procs [][]string) bool {
	for _, p := range procs {
		switch procName(p) {
		case "bird", "bird6":
			return true
		}
	}
	return false
}
