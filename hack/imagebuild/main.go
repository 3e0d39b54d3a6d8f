// Command imagebuild builds the Tabby image (make image) with no Docker
// daemon and no registry: the static Go binaries image.conf names, plus
// the Debian packages it names and their dependency closure, pinned in
// debian.lock, fetched with apt-get download into a cache and unpacked
// with dpkg-deb, assembled with go-containerregistry into a
// docker-archive tarball that `docker load` and `ctr images import`
// accept.
//
// The build is reproducible: layers are tar streams in path order with
// every owner 0:0 and every time SOURCE_DATE_EPOCH (0 when unset), the
// packages are the pinned files (their hashes checked), and the
// configuration's dates are that time too. The same binaries and lock
// give the same digest, which is printed on the last line.
//
// The pure parts (image.conf, debian.lock, the apt dependency closure,
// the in-memory tree with Debian's merged /usr, its tar layers, the ELF
// check that every library and plugin the image holds finds what it
// needs) are unit-tested; apt, dpkg-deb and go build sit at the edge
// (debs.go).
//
// Usage:
//
//	imagebuild [-conf F] [-lock F] [-cache DIR] [-bin DIR] [-version F] [-out F]
//	imagebuild -update-lock   # re-pin debian.lock from apt's candidates
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Repository is the image's name without the tag; the tag is VERSION's.
const Repository = "docker.io/tabbynet/tabby"

type options struct {
	conf, lock, cache, bin, version, out, goBin string
	updateLock                                  bool
}

func main() {
	home, _ := os.UserHomeDir()
	var o options
	flag.StringVar(&o.conf, "conf", "hack/imagebuild/image.conf", "what the image holds")
	flag.StringVar(&o.lock, "lock", "hack/imagebuild/debian.lock", "the pinned Debian packages")
	flag.StringVar(&o.cache, "cache", filepath.Join(home, ".cache/tabby-image"), "where .deb files are kept")
	flag.StringVar(&o.bin, "bin", "bin/image", "where the image's static binaries are built")
	flag.StringVar(&o.version, "version", "VERSION", "the file holding the version (the image's tag)")
	flag.StringVar(&o.out, "out", "bin/tabby-image.tar", "the image tarball to write")
	flag.StringVar(&o.goBin, "go", "go", "the go command")
	flag.BoolVar(&o.updateLock, "update-lock", false, "re-pin debian.lock to apt's current candidates and exit")
	flag.Parse()
	if err := runMain(o); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func runMain(o options) error {
	confText, err := os.ReadFile(o.conf)
	if err != nil {
		return err
	}
	spec, err := ParseSpec(string(confText))
	if err != nil {
		return err
	}
	if o.updateLock {
		l, err := ResolveLock(spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "pinned %d packages\n", len(l.Pins))
		return os.WriteFile(o.lock, []byte(l.Format()), 0o644)
	}
	return build(o, spec)
}

func build(o options, spec Spec) error {
	version, err := ReadVersion(o.version)
	if err != nil {
		return err
	}
	epoch, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	lockText, err := os.ReadFile(o.lock)
	if err != nil {
		return err
	}
	lock, err := ParseLock(string(lockText))
	if err != nil {
		return err
	}
	if lock.Suite != spec.Suite {
		return fmt.Errorf("debian.lock is for %s, image.conf asks for %s: run -update-lock", lock.Suite, spec.Suite)
	}
	debs, err := FetchDebs(lock, filepath.Join(o.cache, "debs"))
	if err != nil {
		return err
	}
	base, err := debianTree(debs)
	if err != nil {
		return err
	}
	if err := BuildBinaries(o.goBin, spec, o.bin); err != nil {
		return err
	}
	bins, err := binaryTree(spec, o.bin)
	if err != nil {
		return err
	}
	return assemble(o.out, version, epoch, spec, base, bins)
}

// debianTree is the packages' layer content, checked to load.
func debianTree(debs []string) (*Tree, error) {
	t := NewTree()
	if err := AddDebs(t, debs); err != nil {
		return nil, err
	}
	if err := AddBase(t); err != nil {
		return nil, err
	}
	if problems := CheckELF(t); len(problems) > 0 {
		return nil, fmt.Errorf("the packages do not load:\n  %s", strings.Join(problems, "\n  "))
	}
	return t, nil
}

// binaryTree is Tabby's layer: the built binaries, executable.
func binaryTree(spec Spec, dir string) (*Tree, error) {
	t := NewTree()
	for _, b := range spec.Binaries {
		data, err := os.ReadFile(filepath.Join(dir, b.Name))
		if err != nil {
			return nil, err
		}
		if err := t.Add(b.Path(), &Entry{Kind: File, Mode: 0o755, Data: data}); err != nil {
			return nil, err
		}
	}
	if problems := CheckELF(t); len(problems) > 0 {
		return nil, fmt.Errorf("the binaries are not static:\n  %s", strings.Join(problems, "\n  "))
	}
	return t, nil
}

func assemble(out, version string, epoch time.Time, spec Spec, base, bins *Tree) error {
	baseTar, err := base.Tar(epoch)
	if err != nil {
		return err
	}
	binsTar, err := bins.Tar(epoch)
	if err != nil {
		return err
	}
	img, err := BuildImage([]Layer{
		{Tar: baseTar, CreatedBy: "Debian " + spec.Suite + " packages (debian.lock)"},
		{Tar: binsTar, CreatedBy: "Tabby " + version + " binaries"},
	}, ImageConfig{Created: epoch, Cmd: []string{spec.Cmd}, Version: version})
	if err != nil {
		return err
	}
	ref := Repository + ":" + version
	if err := WriteTarball(out, ref, img); err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (image ID %s, unpacked %d bytes)\n%s\n", ref, out, id, len(baseTar)+len(binsTar), digest)
	return nil
}

// ReadVersion reads the VERSION file: one line, "v" and a semantic
// version, which is the image's tag.
func ReadVersion(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(data))
	if !validVersion(v) {
		return "", fmt.Errorf("%s: %q is not a version like v1.2.3", path, v)
	}
	return v, nil
}

func validVersion(v string) bool {
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(core, ".")
	if !strings.HasPrefix(v, "v") || len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return false
		}
	}
	return true
}

// sourceDateEpoch is the time every layer entry and the configuration
// carry: $SOURCE_DATE_EPOCH (seconds), or the Unix epoch when unset.
func sourceDateEpoch(env string) (time.Time, error) {
	if env == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(env, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", env, err)
	}
	return time.Unix(s, 0).UTC(), nil
}
