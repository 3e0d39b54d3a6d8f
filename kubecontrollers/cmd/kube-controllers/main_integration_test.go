//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/kubecontrollers/leader"
	"github.com/tabbynet/tabby/lib/calicolog"
)

// TestIntegrationKilledLeaderIsReplaced runs two kube-controllers
// processes on the Kubernetes datastore, as the Deployment would with two
// replicas: one holds the Lease and is ready (check-status -r), the other
// waits. The leader is killed with SIGKILL (no chance to give the Lease
// up); the other takes the Lease once it expires, becomes ready, and does
// the work: a node deleted afterwards has its block affinities released.
func TestIntegrationKilledLeaderIsReplaced(t *testing.T) {
	bin := t.TempDir()
	for _, pkg := range []string{".", "../check-status"} {
		if out, err := exec.Command("go", "build", "-o", bin+"/", pkg).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
	}
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../../manifests/crds")
	kube := kubernetes.NewForConfigOrDie(rc)
	ds, err := kdd.New(kdd.Config{REST: rc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	spec := v3.KubeControllersDefaults()
	spec.PrometheusMetricsPort = new(0)
	spec.Controllers.Node.ReconcilerPeriod = &metav1.Duration{Duration: 200 * time.Millisecond}
	spec.Controllers.Node.LeakGracePeriod = &metav1.Duration{Duration: time.Hour}
	for _, r := range []v3.Resource{
		&v3.KubeControllersConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindKubeControllersConfiguration, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec},
		&v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v3.IPPoolSpec{CIDR: "10.74.0.0/16", BlockSize: 28}},
	} {
		if _, err := ds.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ipam.New(ds, ipam.Config{}).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "ipip-tunnel-addr-" + n,
			Hostname: n, Attrs: map[string]string{ipam.AttrNode: n, ipam.AttrType: "ipipTunnelAddress"}}); err != nil {
			t.Fatal(err)
		}
	}

	type replica struct {
		cmd    *exec.Cmd
		status string
	}
	replicas := map[string]*replica{}
	dir := t.TempDir()
	for _, id := range []string{"one", "two"} {
		r := &replica{status: filepath.Join(dir, id, "status.json")}
		r.cmd = exec.Command(filepath.Join(bin, "kube-controllers"), "-status-file", r.status, "-identity", id,
			"-lease-duration", "3s", "-lease-renew-deadline", "2s", "-lease-retry-period", "200ms")
		r.cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig(), "DATASTORE_TYPE=kubernetes", "ENABLED_CONTROLLERS=node")
		logf, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		r.cmd.Stdout, r.cmd.Stderr = logf, logf
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			r.cmd.Process.Kill()
			r.cmd.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s's log:\n%s", id, b)
			}
		})
		replicas[id] = r
	}

	holder := func() string {
		l, err := kube.CoordinationV1().Leases(leader.DefaultNamespace).Get(ctx, leader.DefaultName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	ready := func(r *replica) bool {
		return exec.Command(filepath.Join(bin, "check-status"), "-r", "-f", r.status).Run() == nil
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("never: %s", what)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	wait("a replica holds the Lease", func() bool { return replicas[holder()] != nil })
	first := holder()
	second := map[string]string{"one": "two", "two": "one"}[first]
	wait("the leader is ready", func() bool { return ready(replicas[first]) })

	if err := replicas[first].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	replicas[first].cmd.Wait()
	wait("the other replica takes the Lease", func() bool { return holder() == second })
	wait("the new leader is ready", func() bool { return ready(replicas[second]) })

	if err := kube.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	affinities := func() map[string]int {
		l, err := ds.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range l.Items {
			out[r.(*v3.BlockAffinity).Spec.Node]++
		}
		return out
	}
	wait("node-a's block affinities released by the new leader", func() bool { return affinities()["node-a"] == 0 })
	if affinities()["node-b"] == 0 {
		t.Fatal("node-b lost its affinity")
	}
	// Every line both replicas wrote is in Calico's log line format.
	for id := range replicas {
		b, err := os.ReadFile(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if m := calicolog.LinePattern().FindStringSubmatch(l); m == nil || m[4] != "kube-controllers" {
				t.Errorf("%s: not Calico's log line format (component kube-controllers): %q", id, l)
			}
		}
	}
}
