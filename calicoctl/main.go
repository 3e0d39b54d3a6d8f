// Command calicoctl is Tabby's CLI, compatible with Calico's calicoctl.
// It only wires the datastore backends and hands over to the commands
// package.
package main

import (
	"os"

	"github.com/tabbynet/tabby/calicoctl/commands"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func main() {
	backends := dsconfig.Backends{
		Kubernetes:    commands.WithKubeconfigSettings(kdd.FromSpec),
		EtcdTransport: etcdlib.New, // long-running: etcd's client library
	}
	os.Exit(commands.Execute(os.Args[1:], os.Stdout, os.Stderr, backends))
}
