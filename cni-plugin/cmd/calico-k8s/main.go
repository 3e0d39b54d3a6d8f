// Command calico-k8s is the calico CNI plugin with the Kubernetes
// datastore linked in (client-go): the calico binary hands it every call
// whose network config says datastore_type kubernetes. It can also be
// installed as the plugin itself. It only wires packages together.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/tabbynet/tabby/cni-plugin/kubepods"
	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func main() {
	dsconfig.NewKubernetesClient = kdd.FromSpec
	p := plugin.New()
	p.PodsFor = kubepods.For
	skel.PluginMainFuncs(p.Funcs(), plugin.SupportedVersions, plugin.About)
}
