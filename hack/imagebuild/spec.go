package main

import (
	"fmt"
	"path"
	"strings"
)

// Spec is image.conf read: what the image holds.
type Spec struct {
	Suite    string   // Debian release, e.g. "bookworm"
	Packages []string // Debian packages asked for, in file order
	Skip     []string // dependencies left out of the closure
	Binaries []Binary // static Go binaries, in file order
	Cmd      string   // the image's default command
}

// Binary is one static Go binary of the image.
type Binary struct {
	Dir     string // absolute directory in the image, e.g. /usr/bin
	Name    string // file name
	Package string // Go package path to build
}

// Path is where the binary lives in the image.
func (b Binary) Path() string { return path.Join(b.Dir, b.Name) }

// ParseSpec reads image.conf. Unknown keywords, wrong arity, duplicates
// and a missing suite or cmd are errors naming the line.
func ParseSpec(text string) (Spec, error) {
	var s Spec
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if err := s.addLine(f, seen); err != nil {
			return Spec{}, fmt.Errorf("image.conf line %d: %w", i+1, err)
		}
	}
	if s.Suite == "" || s.Cmd == "" || len(s.Packages) == 0 || len(s.Binaries) == 0 {
		return Spec{}, fmt.Errorf("image.conf: needs suite, cmd, a package and a binary")
	}
	return s, nil
}

func (s *Spec) addLine(f []string, seen map[string]bool) error {
	arity := map[string]int{"suite": 2, "package": 2, "skip": 2, "binary": 4, "cmd": 2}
	want, ok := arity[f[0]]
	if !ok {
		return fmt.Errorf("unknown keyword %q", f[0])
	}
	if len(f) != want {
		return fmt.Errorf("%s takes %d words, got %d", f[0], want-1, len(f)-1)
	}
	key := f[0] + " " + f[1]
	switch f[0] {
	case "suite", "cmd":
		key = f[0]
	case "binary":
		key = "binary " + path.Join(f[1], f[2])
	}
	if seen[key] {
		return fmt.Errorf("%s given twice", key)
	}
	seen[key] = true
	switch f[0] {
	case "suite":
		s.Suite = f[1]
	case "package":
		s.Packages = append(s.Packages, f[1])
	case "skip":
		s.Skip = append(s.Skip, f[1])
	case "binary":
		if !path.IsAbs(f[1]) {
			return fmt.Errorf("binary directory %q is not absolute", f[1])
		}
		s.Binaries = append(s.Binaries, Binary{Dir: path.Clean(f[1]), Name: f[2], Package: f[3]})
	case "cmd":
		s.Cmd = f[1]
	}
	return nil
}
