package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// Open opens the cluster whose state is in dir.
func Open(dir, bin, kubeBin string, out io.Writer) (*Cluster, error) {
	s, err := loadState(dir)
	if err != nil {
		return nil, err
	}
	return &Cluster{Dir: dir, Bin: bin, KubeBin: kubeBin, State: *s, out: out}, nil
}

// Down removes everything of the cluster in dir, whatever state Up left
// it in: it finds the processes by their marker (containers through the
// cluster's cgroups), then removes the cgroups, namespaces and the state
// folder. Mounts die with the node mount namespaces.
func Down(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, harness.PrefixFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	prefix := strings.TrimSpace(string(b))
	if prefix == "" {
		return fmt.Errorf("empty prefix in %s", filepath.Join(dir, harness.PrefixFile))
	}
	// Daemons first (a kubelet would restart what is killed under it),
	// then whatever still runs in the cluster's cgroups (containers,
	// shims).
	var errs []error
	if err := harness.KillAll(markedProcesses(prefix), 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := harness.KillAll(cgroupProcesses(prefix), 2*time.Second); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, removeCgroups(prefix))
	for _, ns := range harness.NetnsWithPrefix(prefix) {
		if _, err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// cgroupProcesses lists every process in the cluster's cgroups.
func cgroupProcesses(prefix string) []int {
	seen := map[int]bool{}
	var out []int
	for _, root := range clusterCgroups(prefix) {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && !seen[pid] && pid != os.Getpid() {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// removeCgroups removes the cluster's cgroup folders, deepest first.
func removeCgroups(prefix string) error {
	var dirs []string
	for _, root := range clusterCgroups(prefix) {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		var err error
		for i := 0; i < 50; i++ { // a cgroup empties shortly after its last process exits
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Env is the shell exports pointing kubectl and calicoctl at the cluster.
func (c *Cluster) Env() string {
	s := fmt.Sprintf("export PATH=%s:$PATH\n", c.KubeBin)
	for _, v := range c.ClientEnv() {
		s += "export " + v + "\n"
	}
	return s
}

// ClientEnv is the environment of kubectl and calicoctl for the cluster.
func (c *Cluster) ClientEnv() []string {
	env := []string{"KUBECONFIG=" + c.State.Kubeconfig}
	if c.State.Datastore == DatastoreEtcd {
		return append(env, "DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS="+c.State.Etcd)
	}
	return append(env, "DATASTORE_TYPE=kubernetes")
}

// Status prints the nodes and the pods of every namespace, as kubectl
// shows them.
func (c *Cluster) Status(ctx context.Context, out io.Writer) error {
	fmt.Fprintf(out, "cluster %s (%s datastore, %s), API server %s\n", c.State.Prefix, c.State.Datastore, c.State.Phase, c.State.APIServer)
	for _, args := range [][]string{{"get", "nodes", "-o", "wide"}, {"get", "pods", "-A", "-o", "wide"}} {
		s, err := c.Kubectl(ctx, args...)
		if err != nil {
			return err
		}
		fmt.Fprint(out, s)
	}
	return nil
}

// Leftovers lists what of the cluster with prefix still exists outside
// its state folder: namespaces, processes, cgroups.
func Leftovers(prefix string) []string {
	out := harness.NetnsWithPrefix(prefix)
	for _, p := range markedProcesses(prefix) {
		out = append(out, fmt.Sprintf("process %d", p))
	}
	return append(out, clusterCgroups(prefix)...)
}
