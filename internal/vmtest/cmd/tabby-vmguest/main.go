// Command tabby-vmguest is the agent a VM of internal/vmtest runs: the
// guest's init starts it from the 9p share with the VM's id (see package
// guest).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

func main() {
	share := flag.String("share", "/mnt/share", "the 9p share holding config.json and bin/")
	id := flag.Int("id", -1, "this VM's id (tabby.id= on the kernel command line)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a, err := guest.New(*share, *id, log)
	if err == nil {
		err = a.Run(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tabby-vmguest:", err)
		os.Exit(1)
	}
}
