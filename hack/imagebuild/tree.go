package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// Kind is what a Tree entry is.
type Kind int

// The kinds of entry a Tree holds.
const (
	Dir Kind = iota
	File
	Symlink
)

// Entry is one file system object of a Tree.
type Entry struct {
	Kind Kind
	Mode int64  // permission bits (and setuid/setgid/sticky)
	Data []byte // File
	Link string // Symlink target, as written
}

// Tree is a file system built in memory: paths are clean, relative to
// the root ("usr/bin/ip"), and every parent directory is an entry. It is
// the pure core of the image build: packages and binaries go in, sorted
// tar layers come out.
type Tree struct {
	entries map[string]*Entry
}

// NewTree returns an empty tree.
func NewTree() *Tree { return &Tree{entries: map[string]*Entry{}} }

// mergedDirs are the top-level directories Debian's merged /usr folds
// into /usr: a package's /sbin/x lands in /usr/sbin/x and /sbin is a
// symlink to usr/sbin, as on an installed bookworm (usrmerge) or trixie.
var mergedDirs = []string{"bin", "sbin", "lib", "lib64"}

// mergedPath maps a package path into merged /usr.
func mergedPath(p string) string {
	for _, d := range mergedDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "usr/" + p
		}
	}
	return p
}

// AddMergedSymlinks adds bin -> usr/bin and the others of mergedDirs.
func (t *Tree) AddMergedSymlinks() error {
	for _, d := range mergedDirs {
		if err := t.Add(d, &Entry{Kind: Symlink, Mode: 0o777, Link: "usr/" + d}); err != nil {
			return err
		}
	}
	return nil
}

// Add puts an entry at p, creating missing parents (0755). Adding a
// directory where one is, or a file identical to the one there, is a
// no-op; any other clash is an error, never an overwrite.
func (t *Tree) Add(p string, e *Entry) error {
	p = path.Clean(strings.TrimPrefix(p, "/"))
	if p == "." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("bad path %q", p)
	}
	if dir := path.Dir(p); dir != "." {
		if err := t.Add(dir, &Entry{Kind: Dir, Mode: 0o755}); err != nil {
			return err
		}
	}
	old, ok := t.entries[p]
	if !ok {
		t.entries[p] = e
		return nil
	}
	if old.Kind == e.Kind && (e.Kind == Dir || old.Link == e.Link && bytes.Equal(old.Data, e.Data) && old.Mode == e.Mode) {
		return nil
	}
	return fmt.Errorf("%s: two different entries for one path", p)
}

// Get returns the entry at p (not following symlinks).
func (t *Tree) Get(p string) (*Entry, bool) {
	e, ok := t.entries[path.Clean(strings.TrimPrefix(p, "/"))]
	return e, ok
}

// Paths returns every path, sorted.
func (t *Tree) Paths() []string {
	out := make([]string, 0, len(t.entries))
	for p := range t.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Resolve follows symlinks (in every component) and returns the path of
// the object p names, or an error when it names nothing.
func (t *Tree) Resolve(p string) (string, error) {
	return t.resolve(path.Clean(strings.TrimPrefix(p, "/")), 0)
}

func (t *Tree) resolve(p string, hops int) (string, error) {
	if hops > 40 {
		return "", fmt.Errorf("%s: too many symlinks", p)
	}
	parts := strings.Split(p, "/")
	cur := ""
	for i, part := range parts {
		next := path.Join(cur, part)
		e, ok := t.entries[next]
		if !ok {
			return "", fmt.Errorf("%s: no such file", p)
		}
		if e.Kind == Symlink {
			target := e.Link
			if !path.IsAbs(target) {
				target = path.Join(cur, target)
			}
			rest := append([]string{strings.TrimPrefix(path.Clean("/"+target), "/")}, parts[i+1:]...)
			return t.resolve(path.Join(rest...), hops+1)
		}
		cur = next
	}
	return cur, nil
}

// Filter decides which package paths the image keeps.
type Filter func(p string) bool

// KeepPackagePath drops documentation (keeping licences) and man/info
// pages, which nothing in the image reads.
func KeepPackagePath(p string) bool {
	for _, d := range []string{"usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale", "usr/share/bug"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return false
		}
	}
	if strings.HasPrefix(p, "usr/share/doc/") {
		return strings.Count(p, "/") == 3 || path.Base(p) == "copyright"
	}
	return true
}

// AddDebTar adds a Debian package's data (the tar stream of dpkg-deb
// --fsys-tarfile) into merged /usr, keeping what keep accepts. A
// relative symlink moved by the merge is made absolute so it still
// names its target; a symlink that would point at itself once merged
// (a compatibility link such as /bin/x -> /usr/bin/x) is dropped. Hard
// links become copies.
func (t *Tree) AddDebTar(r io.Reader, keep Filter) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := t.addDebEntry(tr, h, keep); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

func (t *Tree) addDebEntry(tr *tar.Reader, h *tar.Header, keep Filter) error {
	orig := path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Name, "."), "/"))
	if orig == "." || orig == "" {
		return nil
	}
	p := mergedPath(orig)
	if !keep(p) {
		return nil
	}
	mode := h.Mode & 0o7777
	switch h.Typeflag {
	case tar.TypeDir:
		return t.Add(p, &Entry{Kind: Dir, Mode: mode})
	case tar.TypeReg:
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		return t.Add(p, &Entry{Kind: File, Mode: mode, Data: data})
	case tar.TypeSymlink:
		return t.addDebSymlink(orig, p, h.Linkname)
	case tar.TypeLink:
		src, ok := t.Get(mergedPath(path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "."), "/"))))
		if !ok || src.Kind != File {
			return fmt.Errorf("hard link to %s, which is not a file seen before", h.Linkname)
		}
		return t.Add(p, &Entry{Kind: File, Mode: src.Mode, Data: src.Data})
	default:
		return fmt.Errorf("unsupported tar entry type %q", h.Typeflag)
	}
}

func (t *Tree) addDebSymlink(orig, p, link string) error {
	target := link
	if p != orig && !path.IsAbs(link) {
		target = "/" + path.Join(path.Dir(orig), link)
	}
	abs := target
	if !path.IsAbs(abs) {
		abs = "/" + path.Join(path.Dir(p), abs)
	}
	if mergedPath(strings.TrimPrefix(path.Clean(abs), "/")) == p {
		return nil
	}
	return t.Add(p, &Entry{Kind: Symlink, Mode: 0o777, Link: target})
}
