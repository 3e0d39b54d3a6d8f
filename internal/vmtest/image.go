package vmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Image is the cached VM image: an ext4 root filesystem holding Debian's
// packages and the kernel and initrd booted from it.
type Image struct {
	Dir, Root, Kernel, Initrd string
}

// RepoRoot is the Tabby checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// CacheDir is where the image and the guest binaries are kept:
// $TABBY_VM_CACHE, else ~/.cache/tabby-vm (as hack/build-vm-image.sh).
func CacheDir() string {
	if d := os.Getenv("TABBY_VM_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), ".cache")
	}
	return filepath.Join(base, "tabby-vm")
}

// EnsureImage returns the cached image, building it first when the
// package list or the guest's init changed (hack/build-vm-image.sh: ~4 min
// cold, instant when cached).
func EnsureImage(ctx context.Context) (Image, error) {
	script := filepath.Join(RepoRoot(), "hack", "build-vm-image.sh")
	cmd := exec.CommandContext(ctx, script)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Image{}, fmt.Errorf("building the VM image (%s): %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := lines[len(lines)-1]
	img := Image{Dir: dir, Root: filepath.Join(dir, "root.img"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	for _, f := range []string{img.Root, img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return Image{}, fmt.Errorf("the VM image in %s is incomplete: %w", dir, err)
		}
	}
	return img, nil
}
