package cluster

import (
	"context"
	_ "embed" // the CoreDNS manifest
	"os"
	"path/filepath"
	"strings"
)

// The cluster DNS (Options.DNS): CoreDNS, built from its Go module by
// hack/build-coredns.sh into the Kubernetes binaries' folder, packed into
// an image of its own and run as kubeadm runs it, behind the Service
// kube-dns at the address the kubelets' clusterDNS names.
const (
	CoreDNSImage = "docker.io/tabbynet/coredns:test"
	dnsServiceIP = "10.96.0.10"
	// nsswitchConf makes getent read /etc/hosts before asking the DNS, as
	// upstream's DNS test images do (glibc's default without the file
	// asks the DNS first and stops at its "no such name").
	nsswitchConf = "hosts: files dns\n"
)

// corednsManifest is coredns.yaml, IMAGE and CLUSTER_IP to be replaced.
//
//go:embed coredns.yaml
var corednsManifest string

// dnsTools are what the DNS e2e's probers run in agnhost (and in the
// glibc-dns-testing image, which is agnhost here) besides busybox's sh,
// seq and sleep: dig (bind9-dnsutils; hack/install-packages.sh installs
// it) and glibc's getent, with their libraries.
var dnsTools = []program{{"/usr/bin/getent", "/usr/bin/getent"}, {"/usr/bin/dig", "/usr/bin/dig"}}

// installDNS applies the CoreDNS manifest.
func (c *Cluster) installDNS(ctx context.Context) error {
	m := strings.NewReplacer("IMAGE", CoreDNSImage, "CLUSTER_IP", dnsServiceIP).Replace(corednsManifest)
	path := filepath.Join(c.Dir, "coredns.yaml")
	if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "apply", "--server-side", "-f", path)
	return err
}
