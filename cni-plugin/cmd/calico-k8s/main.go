// Command calico-k8s is the calico CNI plugin with the Kubernetes
// datastore linked in (client-go): the calico binary hands it every call
// whose network config says datastore_type kubernetes, and every ADD of a
// Kubernetes pod in etcd mode whose config has a kubeconfig and policy
// type k8s (the pod is then read from Kubernetes, as Calico's plugin
// reads it). It can also be installed as the plugin itself, which
// install-cni does when the network configuration uses the Kubernetes
// datastore (one process start per call instead of two). It only wires
// packages together.
package main

import (
	"runtime/debug"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/tabbynet/tabby/cni-plugin/kubepods"
	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func main() {
	plugin.Started = time.Now()
	// One call per process, as the calico binary: collecting garbage
	// only costs time; the limit keeps a runaway call bounded.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(256 << 20)
	p := plugin.New(dsconfig.Backends{Kubernetes: kdd.FromSpec})
	p.PodsFor = kubepods.For
	p.PodReaderFor = kubepods.ReaderFor
	skel.PluginMainFuncs(p.Funcs(), plugin.SupportedVersions, plugin.About)
}
