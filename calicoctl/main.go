// Command calicoctl is Tabby's CLI, compatible with Calico's calicoctl.
// It only wires flags to the commands package.
package main

import (
	"os"

	"github.com/tabbynet/tabby/calicoctl/commands"
)

func main() {
	os.Exit(commands.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
