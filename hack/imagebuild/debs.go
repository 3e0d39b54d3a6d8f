package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// aptFlags keep apt-cache depends to what a package needs to run.
var aptFlags = []string{"--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"}

// run runs a command and returns its stdout, with stderr in the error.
func run(dir, name string, args ...string) ([]byte, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %v: %w: %s", name, args, err, errb.String())
	}
	return out.Bytes(), nil
}

// aptDepends asks apt-cache for the dependencies of names.
func aptDepends(names []string) (map[string][]DepGroup, error) {
	out, err := run("", "apt-cache", append(append([]string{"depends"}, aptFlags...), names...)...)
	if err != nil {
		return nil, err
	}
	return ParseDepends(string(out))
}

// ResolveLock pins the closure of the spec's packages at the versions
// apt would install now (the candidate of each).
func ResolveLock(s Spec) (Lock, error) {
	names, err := Closure(s.Packages, s.Skip, aptDepends)
	if err != nil {
		return Lock{}, err
	}
	out, err := run("", "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return Lock{}, err
	}
	pins, err := ParseShow(string(out))
	if err != nil {
		return Lock{}, err
	}
	if len(pins) != len(names) {
		return Lock{}, fmt.Errorf("apt-cache show gave %d packages for %d names", len(pins), len(names))
	}
	return Lock{Suite: s.Suite, Pins: pins}, nil
}

// FetchDebs makes sure every pinned .deb is in dir with its pinned hash,
// downloading the missing ones with apt-get download (one call). A file
// whose hash differs is an error, never used.
func FetchDebs(l Lock, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range l.Pins {
		if _, err := os.Stat(filepath.Join(dir, p.DebFile())); err != nil {
			missing = append(missing, p.Name+"="+p.Version)
		}
	}
	if len(missing) > 0 {
		if _, err := run(dir, "apt-get", append([]string{"download", "-q"}, missing...)...); err != nil {
			return nil, fmt.Errorf("downloading the pinned packages (run apt-get update; if a version left the archive, re-pin with -update-lock): %w", err)
		}
	}
	var files []string
	for _, p := range l.Pins {
		f := filepath.Join(dir, p.DebFile())
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != p.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %x, debian.lock pins %s", f, sum, p.SHA256)
		}
		files = append(files, f)
	}
	return files, nil
}

// AddDebs unpacks each .deb (dpkg-deb --fsys-tarfile) into the tree.
func AddDebs(t *Tree, files []string) error {
	for _, f := range files {
		data, err := run("", "dpkg-deb", "--fsys-tarfile", f)
		if err != nil {
			return err
		}
		if err := t.AddDebTar(bytes.NewReader(data), KeepPackagePath); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

// BuildBinaries builds the spec's Go binaries static into dir
// (CGO_ENABLED=0, -trimpath, symbols stripped), with one go build.
func BuildBinaries(goBin string, s Spec, dir string) error {
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + "/"}
	for _, b := range s.Binaries {
		if filepath.Base(b.Package) != b.Name {
			return fmt.Errorf("binary %s: go build names it %s", b.Name, filepath.Base(b.Package))
		}
		args = append(args, b.Package)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}
