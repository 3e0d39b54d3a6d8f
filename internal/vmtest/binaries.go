package vmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// GuestPackages are the binaries a VM gets in its share's bin/: the
// agent, calico-node and the calico CNI plugin (which is also
// calico-ipam, by the name it is run as).
var GuestPackages = map[string]string{
	"tabby-vmguest": "github.com/tabbynet/tabby/internal/vmtest/cmd/tabby-vmguest",
	"calico-node":   "github.com/tabbynet/tabby/node/cmd/calico-node",
	"calico":        "github.com/tabbynet/tabby/cni-plugin/cmd/calico",
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// BuildGuestBinaries builds GuestPackages once per process, statically
// (CGO_ENABLED=0: the guest's libc is not the host's concern), into
// <cache>/guest-bin (Go's build cache makes a rebuild cheap; nothing is
// left in /tmp), and copies them into dst with calico-ipam beside calico.
func BuildGuestBinaries(dst string) error {
	buildOnce.Do(func() {
		buildDir = filepath.Join(CacheDir(), "guest-bin")
		if buildErr = os.MkdirAll(buildDir, 0o755); buildErr != nil {
			return
		}
		// One go command for all: it builds their shared packages once.
		args := []string{"build", "-o", buildDir + "/"}
		for _, pkg := range GuestPackages {
			args = append(args, pkg)
		}
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...)
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the guest binaries: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		return buildErr
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for name := range GuestPackages {
		if err := copyFile(filepath.Join(buildDir, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return copyFile(filepath.Join(buildDir, "calico"), filepath.Join(dst, "calico-ipam"))
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
