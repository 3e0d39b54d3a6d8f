package commands

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

type clusterDiagOpts struct {
	since              string
	maxLogs            int
	maxParallelism     int
	focusNodes         string
	skipTempDirCleanup bool
}

func newClusterCmd(a *app) *cobra.Command {
	cl := &cobra.Command{
		Use:     "cluster",
		Short:   "Access cluster information",
		Example: "  calicoctl cluster diags",
	}
	o := &clusterDiagOpts{}
	diags := &cobra.Command{
		Use:   "diags",
		Short: "Collect snapshot of diagnostic info and logs related to Calico at the cluster-level",
		Long: `Collect, into ./calico-diagnostics-<time>.tar.gz: the Kubernetes version,
every Calico resource (YAML and wide table, under cluster/crd), the core
Kubernetes objects (under cluster/kubernetes) and the logs of the Calico
pods (under nodes/<node>/<namespace>). Needs the Kubernetes API (the
kubeconfig of the configuration, or the pod's service account).`,
		Example: `  calicoctl cluster diags
  calicoctl cluster diags --since=1h --max-logs=2 --focus-nodes=node1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.clusterDiags(cmdContext(cmd), o)
		},
	}
	diags.Flags().StringVar(&o.since, "since", "", "Only collect logs newer than provided relative duration (e.g. 30m, 2h).")
	diags.Flags().IntVar(&o.maxLogs, "max-logs", 5, "Only collect up to this number of logs, for each kind of Calico component.")
	// Tabby collects one pod at a time, within any --max-parallelism.
	diags.Flags().IntVar(&o.maxParallelism, "max-parallelism", 10, "Maximum number of parallel threads to use for collecting logs.")
	diags.Flags().StringVar(&o.focusNodes, "focus-nodes", "", "Comma-separated list of nodes from which to try first to collect logs.")
	diags.Flags().BoolVar(&o.skipTempDirCleanup, "skip-temp-dir-cleanup", false, "Don't clean up the temporary directory.")
	cl.AddCommand(diags)
	return cl
}

// kubeRESTConfig is the Kubernetes API client configuration the
// datastore configuration names (kubeconfig, inline kubeconfig, context).
func kubeRESTConfig(s dsconfig.Spec) (*rest.Config, error) {
	if s.KubeconfigInline != "" {
		cfg, err := clientcmd.Load([]byte(s.KubeconfigInline))
		if err != nil {
			return nil, fmt.Errorf("kubeconfigInline: %w", err)
		}
		return clientcmd.NewNonInteractiveClientConfig(*cfg, s.K8sCurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = s.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.K8sCurrentContext}).ClientConfig()
}

// clusterDiags is Calico's cluster diags over Tabby's datastore client and
// client-go (Calico shells out to kubectl). Per-node dumps that Calico
// takes with kubectl exec into calico-node are node diags' job here.
func (a *app) clusterDiags(ctx context.Context, o *clusterDiagOpts) error {
	var since time.Duration
	if o.since != "" {
		d, err := time.ParseDuration(o.since)
		if err != nil || d < 0 {
			return fmt.Errorf("invalid duration for since flag (try 10s, 5m, or 1h): %s", o.since)
		}
		since = d
	}
	if o.maxLogs < 0 {
		return fmt.Errorf("negative value for max-logs flag")
	}
	spec, err := a.spec()
	if err != nil {
		return err
	}
	rc, err := kubeRESTConfig(spec)
	if err != nil {
		return fmt.Errorf("missing dependency: cluster diags needs the Kubernetes API: %w", err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("ERROR creating clients: %w", err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()

	fmt.Fprintln(a.stdout, "==== Begin collecting diagnostics. ====")
	tmp, err := os.MkdirTemp("", "")
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "Created temporary directory:", tmp)
	if !o.skipTempDirCleanup {
		defer os.RemoveAll(tmp)
	}
	name := "calico-diagnostics-" + a.now().UTC().Format("20060102_150405")
	dir := filepath.Join(tmp, name)
	w := &diagWriter{out: a.stdout, root: dir}

	a.collectPodLogs(ctx, w, kube, o, since)
	fmt.Fprintln(a.stdout, "Collecting kubernetes version...")
	if v, err := kube.Discovery().ServerVersion(); err != nil {
		fmt.Fprintf(a.stdout, "ERROR collecting the Kubernetes version: %v\n", err)
	} else {
		w.writeYAML("Collect kubernetes Client and Server version", "cluster/version.yaml", map[string]any{"serverVersion": v})
	}
	a.collectCalicoResources(ctx, w, c)
	collectKubernetesResources(ctx, w, kube)

	fmt.Fprintln(a.stdout, "\n==== Producing a diagnostics bundle. ====")
	archive := name + ".tar.gz"
	if err := writeTarGz(filepath.Join(a.dir(), archive), tmp, name); err != nil {
		fmt.Fprintf(a.stdout, "Could not create new archive %s: %s\n", archive, err)
		return err
	}
	fmt.Fprintf(a.stdout, "Diagnostic bundle created at ./%s\n", archive)
	return nil
}

// dir is where cluster diags writes its bundle: the working directory.
func (a *app) dir() string {
	if a.workDir != "" {
		return a.workDir
	}
	return "."
}

// diagWriter writes bundle files, reporting each as Calico does and
// carrying on past failures (a diagnostics run collects what it can).
type diagWriter struct {
	out  io.Writer
	root string
}

func (w *diagWriter) write(info, rel string, data []byte) {
	if info != "" {
		fmt.Fprintln(w.out, info)
	}
	path := filepath.Join(w.root, rel)
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(w.out, "ERROR writing %s: %v\n", rel, err)
	}
}

func (w *diagWriter) writeYAML(info, rel string, v any) {
	y, err := yaml.Marshal(v)
	if err != nil {
		fmt.Fprintf(w.out, "ERROR encoding %s: %v\n", rel, err)
		return
	}
	w.write(info, rel, y)
}

// collectCalicoResources writes every Calico kind, as YAML and as the wide
// table, named by its CRD (ippools.crd.projectcalico.org.yaml, ...).
func (a *app) collectCalicoResources(ctx context.Context, w *diagWriter, c datastore.Client) {
	for _, info := range v3.Kinds() {
		crd := info.Plural + "." + v3.CRDGroup
		l, err := c.List(ctx, info.Kind, datastore.ListOptions{})
		if err != nil {
			fmt.Fprintf(a.stdout, "ERROR listing %s: %v\n", crd, err)
			continue
		}
		for _, f := range []struct{ format, ext, what string }{{"yaml", "yaml", "yaml"}, {"wide", "txt", "wide text"}} {
			var buf bytes.Buffer
			p := &printer{format: f.format, withNS: info.Namespaced}
			if err := p.print(&buf, info, l.Items, true, clusterConfig(ctx, c)); err != nil {
				fmt.Fprintf(a.stdout, "ERROR printing %s: %v\n", crd, err)
				continue
			}
			w.write(fmt.Sprintf("Collect Calico %s (%s)", crd, f.what), "cluster/crd/"+crd+"."+f.ext, buf.Bytes())
		}
	}
}

// collectKubernetesResources writes the core objects Calico collects.
func collectKubernetesResources(ctx context.Context, w *diagWriter, kube kubernetes.Interface) {
	fmt.Fprintln(w.out, "Collecting core kubernetes resources...")
	lo := metav1.ListOptions{}
	lists := []struct {
		name string
		list func() (runtime.Object, error)
	}{
		{"nodes", func() (runtime.Object, error) { return kube.CoreV1().Nodes().List(ctx, lo) }},
		{"namespaces", func() (runtime.Object, error) { return kube.CoreV1().Namespaces().List(ctx, lo) }},
		{"pods", func() (runtime.Object, error) { return kube.CoreV1().Pods("").List(ctx, lo) }},
		{"services", func() (runtime.Object, error) { return kube.CoreV1().Services("").List(ctx, lo) }},
		{"endpointslices", func() (runtime.Object, error) { return kube.DiscoveryV1().EndpointSlices("").List(ctx, lo) }},
		{"configmaps", func() (runtime.Object, error) { return kube.CoreV1().ConfigMaps("").List(ctx, lo) }},
		{"daemonsets", func() (runtime.Object, error) { return kube.AppsV1().DaemonSets("").List(ctx, lo) }},
		{"deployments", func() (runtime.Object, error) { return kube.AppsV1().Deployments("").List(ctx, lo) }},
		{"networkpolicies", func() (runtime.Object, error) { return kube.NetworkingV1().NetworkPolicies("").List(ctx, lo) }},
	}
	for _, l := range lists {
		obj, err := l.list()
		if err != nil {
			fmt.Fprintf(w.out, "ERROR listing %s: %v\n", l.name, err)
			continue
		}
		w.writeYAML(fmt.Sprintf("Collect %s (yaml)", l.name), "cluster/kubernetes/"+l.name+".yaml", obj)
	}
}

// isCalicoPod says whether a pod is one of Calico's (or Tabby's) components.
func isCalicoPod(p *corev1.Pod) bool {
	for _, s := range []string{"calico", "tabby", "typha"} {
		if strings.Contains(p.Name, s) {
			return true
		}
	}
	return false
}

// collectPodLogs writes the logs of Calico's pods, at most maxLogs per
// component (owner), the focus nodes' pods first.
func (a *app) collectPodLogs(ctx context.Context, w *diagWriter, kube kubernetes.Interface, o *clusterDiagOpts, since time.Duration) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(a.stdout, "ERROR listing pods: %v\n", err)
		return
	}
	focus := strings.Split(o.focusNodes, ",")
	items := slices.Clone(pods.Items)
	slices.SortStableFunc(items, func(x, y corev1.Pod) int {
		fx, fy := slices.Contains(focus, x.Spec.NodeName), slices.Contains(focus, y.Spec.NodeName)
		switch {
		case fx && !fy:
			return -1
		case fy && !fx:
			return 1
		}
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	taken := map[string]int{}
	for i := range items {
		p := &items[i]
		if !isCalicoPod(p) {
			continue
		}
		owner := p.Namespace + "/" + p.Name
		if len(p.OwnerReferences) > 0 {
			owner = p.Namespace + "/" + p.OwnerReferences[0].Name
		}
		if taken[owner] >= o.maxLogs {
			continue
		}
		taken[owner]++
		node := p.Spec.NodeName
		if node == "" {
			node = "unscheduled"
		}
		fmt.Fprintf(a.stdout, "Collecting detailed diags for pod %v in namespace %v on node %v...\n", p.Name, p.Namespace, node)
		w.writeYAML("", filepath.Join("nodes", node, p.Namespace, p.Name+".yaml"), p)
		opts := &corev1.PodLogOptions{}
		if since > 0 {
			s := int64(since.Seconds())
			opts.SinceSeconds = &s
		}
		logs, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(a.stdout, "ERROR collecting logs for pod %s: %v\n", p.Name, err)
			continue
		}
		w.write(fmt.Sprintf("Collect logs for pod %s", p.Name), filepath.Join("nodes", node, p.Namespace, p.Name+".log"), logs)
	}
}
