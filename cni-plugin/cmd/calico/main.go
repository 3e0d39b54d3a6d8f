// Command calico is the CNI plugin container runtimes call for every pod
// (ADD, DEL, CHECK, STATUS, GC, VERSION; CNI spec 0.3.1 to 1.1.0). It only
// hands skel's callbacks to cni-plugin/plugin.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func main() {
	dsconfig.NewKubernetesClient = kdd.FromSpec
	skel.PluginMainFuncs(plugin.New().Funcs(), version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"), "Tabby calico CNI plugin (Calico-compatible)")
}
