package plugin

import (
	"os"
	"syscall"
	"testing"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
)

// TestBlockHintsNeverBlock: a hint file that is a FIFO, a link to an
// endless device or too large is no hint, and reading it returns at once
// (issue 19, item 8). On the old code the FIFO case never returns.
func TestBlockHintsNeverBlock(t *testing.T) {
	conf := &netconf.NetConf{DatastoreType: "etcdv3", EtcdEndpoints: "http://127.0.0.1:2379"}
	for name, plant := range map[string]func(path string) error{
		"fifo":         func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"link to zero": func(p string) error { return os.Symlink("/dev/zero", p) },
		"too large":    func(p string) error { return os.WriteFile(p, make([]byte, maxHintFile+1), 0o644) },
		"directory":    func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := loadBlockHints(dir, conf, "node1").path
			if err := plant(path); err != nil {
				t.Fatal(err)
			}
			if h := loadBlockHints(dir, conf, "node1"); len(h.read) != 0 {
				t.Fatalf("read hints %v from a %s", h.read, name)
			}
		})
	}
	t.Run("regular file", func(t *testing.T) {
		dir := t.TempDir()
		path := loadBlockHints(dir, conf, "node1").path
		if err := os.WriteFile(path, []byte("10.0.0.0/26\nbogus\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if h := loadBlockHints(dir, conf, "node1"); len(h.read) != 1 || h.read[0].String() != "10.0.0.0/26" {
			t.Fatalf("hints %v", h.read)
		}
	})
}
