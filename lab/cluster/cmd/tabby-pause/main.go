// Command tabby-pause is the cluster's pod sandbox program (the "pause"
// container every pod's namespaces hang on): it sleeps until SIGTERM or
// SIGINT and reaps the zombies it inherits as a pid namespace's init. It
// is static and dependency-free; package cluster packs it as the image
// containerd's sandbox_image names.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
