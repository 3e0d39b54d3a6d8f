package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The names the upstream e2e tests give their images
// (k8s.io/kubernetes/test/utils/image/manifest.go at go.mod's Kubernetes
// version, v1.37.2). The cluster tags its own agnhost and pause images
// with them too, so pods of e2e.test (the NetworkPolicy ones pull
// IfNotPresent) start from what each node's containerd already holds and
// nothing is pulled from a registry.
const (
	E2EAgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	e2ePauseImage   = "registry.k8s.io/pause:3.10.2"
	// CNPAgnhostImage is the agnhost the network-policy-api conformance
	// suite's pods name (its conformance/base/manifests.yaml at v0.2.0).
	CNPAgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.45"
	// The sig-network conformance specs' other images: nginx pods are only
	// scheduled and listed as endpoints (agnhost's pause does), the DNS
	// probers' glibc image runs dig and getent from `sh -c` (agnhost with
	// the DNS tools, dns.go).
	e2eNginxImage    = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	e2eGlibcDNSImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
)

// E2E selections: the ginkgo focus and skip of `make e2e-netpol`.
const (
	// NetpolFocus is every Kubernetes NetworkPolicy e2e test ("Netpol"
	// with [Feature:NetworkPolicy], TCP, UDP and SCTP) and the Netpol API
	// conformance tests.
	NetpolFocus = `\[sig-network\] Netpol`
	// NetpolSkip is empty: nothing of the NetworkPolicy e2e is skipped.
	NetpolSkip = ``
	// NetpolSCTPFocus is the NetworkPolicy e2e's SCTP specs
	// ([Feature:SCTPConnectivity]), for a cluster with VM nodes: this
	// machine's kernel has no SCTP, Debian's in the VMs has
	// (E2EOptions.VMNodesOnly).
	NetpolSCTPFocus = `\[sig-network\] Netpol.*\[Feature:SCTPConnectivity\]`
	// NetworkFocus is every [sig-network] [Conformance] spec (`make
	// e2e-network`; the cluster needs the DNS: Options.DNS).
	NetworkFocus = `\[sig-network\].*\[Conformance\]`
	// NetworkSkip is empty: no sig-network conformance spec needs a cloud
	// (none is a LoadBalancer one) or a feature Tabby does not claim.
	NetworkSkip = ``
)

// E2ESuites are the selections `tabby-lab cluster e2e --suite` names:
// focus and skip.
func E2ESuites() map[string][2]string {
	return map[string][2]string{
		"netpol":  {NetpolFocus, NetpolSkip},
		"network": {NetworkFocus, NetworkSkip},
		// Only on the VM nodes (E2ESuiteOnVMNodes).
		"netpol-sctp": {NetpolSCTPFocus, ""},
	}
}

// E2ESuiteOnVMNodes says whether a suite's pods must run on the VM nodes
// only (their kernel has what this machine's lacks).
func E2ESuiteOnVMNodes(suite string) bool { return suite == "netpol-sctp" }

// NamespaceNodeTaint is the taint (NoSchedule) a run on the VM nodes only
// puts on the namespace nodes, and names to e2e.test as non-blocking.
const NamespaceNodeTaint = "tabby.lab/namespace-node"

// E2EOptions say which upstream e2e tests to run and how.
type E2EOptions struct {
	// E2EBin holds e2e.test and ginkgo (hack/build-kube-binaries.sh e2e).
	E2EBin      string
	Focus, Skip string
	// Procs is the number of ginkgo processes running specs in parallel
	// (default 1).
	Procs int
	// ReportDir receives ginkgo's JSON report and e2e.test's own reports
	// (default <state>/e2e-<time>).
	ReportDir string
	// Timeout bounds the whole run (default 2h).
	Timeout time.Duration
	// VMNodesOnly schedules the specs' pods on the VM nodes only: the
	// namespace nodes are tainted (NamespaceNodeTaint, NoSchedule) for the
	// run and e2e.test told the taint does not block (its
	// --non-blocking-taints); the calico-node DaemonSet tolerates it.
	VMNodesOnly bool
	// Out receives the ginkgo output as it runs (default discarded; it is
	// also kept in ReportDir/e2e.log).
	Out io.Writer
}

// E2EResult counts what a run did with the specs it selected.
type E2EResult struct {
	Passed, Failed, Skipped int
	// NotSelected counts the suite's specs outside the focus.
	NotSelected int
	// Failures names each failed spec with the first line of its failure.
	Failures []string
	Duration time.Duration
	// Report is the JSON report's path.
	Report string
}

// Summary is the closing line of a run: "N passed, N failed, N skipped".
func (r E2EResult) Summary() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// RunE2E runs the upstream e2e.test binary (through the ginkgo CLI)
// against the cluster with the admin kubeconfig and returns its counts,
// read from ginkgo's JSON report. A run whose report cannot be read is an
// error; failed specs are not (they are in the result).
func (c *Cluster) RunE2E(ctx context.Context, o E2EOptions) (E2EResult, error) {
	o.defaults(c.Dir)
	if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
		return E2EResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+5*time.Minute)
	defer cancel()
	if o.VMNodesOnly {
		untaint, err := c.taintNamespaceNodes(ctx)
		if err != nil {
			return E2EResult{}, err
		}
		defer untaint()
	}
	logf, err := os.Create(filepath.Join(o.ReportDir, "e2e.log"))
	if err != nil {
		return E2EResult{}, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(o.E2EBin, "ginkgo"), c.e2eArgs(o)...)
	cmd.Dir = o.ReportDir
	cmd.Stdout = io.MultiWriter(logf, o.Out)
	cmd.Stderr = cmd.Stdout
	// e2e.test reads no registry settings: every image it names is one the
	// nodes already hold (the cluster imports them).
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.State.Kubeconfig)
	start := time.Now()
	runErr := cmd.Run()
	report := filepath.Join(o.ReportDir, "report.json")
	b, err := os.ReadFile(report)
	if err != nil {
		return E2EResult{}, fmt.Errorf("ginkgo wrote no report (%v): %w; see %s", runErr, err, logf.Name())
	}
	r, err := ParseGinkgoReport(b)
	if err != nil {
		return r, fmt.Errorf("%s: %w", report, err)
	}
	r.Duration, r.Report = time.Since(start), report
	// ginkgo exits non-zero when a spec failed; that is in the counts. Any
	// other failure (no spec ran, the suite's setup failed) is an error.
	if runErr != nil && r.Failed == 0 {
		return r, fmt.Errorf("ginkgo: %w with no failed spec; see %s", runErr, logf.Name())
	}
	return r, nil
}

func (o *E2EOptions) defaults(dir string) {
	if o.Procs < 1 {
		o.Procs = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Hour
	}
	if o.ReportDir == "" {
		o.ReportDir = filepath.Join(dir, "e2e-"+time.Now().UTC().Format("20060102-150405"))
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// e2eArgs is the ginkgo command line: ginkgo's own flags, the e2e.test
// binary, then e2e.test's flags.
func (c *Cluster) e2eArgs(o E2EOptions) []string {
	args := []string{"--procs=" + strconv.Itoa(o.Procs), "--no-color", "--timeout=" + o.Timeout.String(),
		"--json-report=report.json", "--output-dir=" + o.ReportDir, "--focus=" + o.Focus}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	args = append(args, filepath.Join(o.E2EBin, "e2e.test"), "--",
		"--kubeconfig="+c.State.Kubeconfig, "--provider=skeleton", "--report-dir="+o.ReportDir,
		// The cluster's nodes are all Linux on Debian's containerd.
		"--node-os-distro=debian", "--num-nodes="+strconv.Itoa(len(c.State.nodeNames())))
	if o.VMNodesOnly {
		args = append(args, "--non-blocking-taints="+NamespaceNodeTaint)
	}
	return args
}

// taintNamespaceNodes puts NamespaceNodeTaint on every namespace node and
// returns what removes it again. A cluster without VM nodes is an error:
// nothing could be scheduled.
func (c *Cluster) taintNamespaceNodes(ctx context.Context) (func(), error) {
	if len(c.State.VMNodes) == 0 {
		return nil, errors.New("this run needs VM nodes: bring the cluster up with --vm-nodes N")
	}
	var names []string
	for _, n := range c.State.Nodes {
		names = append(names, n.Name)
	}
	untaint := func() {
		args := append(append([]string{"taint", "nodes"}, names...), NamespaceNodeTaint+":NoSchedule-")
		_, _ = c.Kubectl(context.Background(), args...)
	}
	args := append(append([]string{"taint", "nodes", "--overwrite"}, names...), NamespaceNodeTaint+"=:NoSchedule")
	if _, err := c.Kubectl(ctx, args...); err != nil {
		untaint()
		return nil, err
	}
	return untaint, nil
}

// ginkgoSpec is the part of a ginkgo v2 JSON spec report read here
// (github.com/onsi/ginkgo/v2/types.SpecReport).
type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	NumAttempts             int
	Failure                 *struct{ Message string }
}

// ParseGinkgoReport counts the It specs of a ginkgo JSON report (one
// report per suite). A spec the focus left out is reported by ginkgo as
// skipped with no attempt made: it counts as not selected; one skipped
// while it ran (e2eskipper: a feature or provider the cluster lacks)
// counts as skipped.
func ParseGinkgoReport(b []byte) (E2EResult, error) {
	var reports []struct{ SpecReports []ginkgoSpec }
	if err := json.Unmarshal(b, &reports); err != nil {
		return E2EResult{}, err
	}
	if len(reports) == 0 {
		return E2EResult{}, errors.New("empty ginkgo report")
	}
	var r E2EResult
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != "It" {
				if s.State != "passed" && s.State != "skipped" {
					r.Failed++
					r.Failures = append(r.Failures, s.LeafNodeType+": "+failureLine(s))
				}
				continue
			}
			r.count(s)
		}
	}
	sort.Strings(r.Failures)
	return r, nil
}

func (r *E2EResult) count(s ginkgoSpec) {
	name := strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
	switch s.State {
	case "passed":
		r.Passed++
	case "skipped", "pending":
		if s.NumAttempts == 0 {
			r.NotSelected++
		} else {
			r.Skipped++
		}
	default: // failed, panicked, interrupted, aborted, timedout
		r.Failed++
		r.Failures = append(r.Failures, name+": "+failureLine(s))
	}
}

func failureLine(s ginkgoSpec) string {
	if s.Failure == nil {
		return s.State
	}
	line, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
	return s.State + ": " + line
}
