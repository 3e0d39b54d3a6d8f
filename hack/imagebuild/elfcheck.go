package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path"
	"strings"
)

// libDirs are where the dynamic loader looks with no ld.so.cache (the
// image has none): Debian's multiarch directories, then the plain ones.
var libDirs = []string{"usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib", "lib", "usr/lib64", "lib64"}

// CheckELF checks that every ELF file of the tree can load: its
// interpreter exists and each library it needs (DT_NEEDED) is found in
// its RUNPATH/RPATH or the loader's default directories. It returns one
// line per problem, so a missing dependency of any binary, library or
// plugin (iptables' xtables .so files included) fails the build instead
// of the node.
func CheckELF(t *Tree) []string {
	var problems []string
	for _, p := range t.Paths() {
		e := t.entries[p]
		if e.Kind != File || !bytes.HasPrefix(e.Data, []byte(elf.ELFMAG)) {
			continue
		}
		f, err := elf.NewFile(bytes.NewReader(e.Data))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: not readable as ELF: %v", p, err))
			continue
		}
		problems = append(problems, checkOne(t, p, f)...)
		f.Close()
	}
	return problems
}

func checkOne(t *Tree, p string, f *elf.File) []string {
	var problems []string
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(buf, 0); err != nil {
			problems = append(problems, fmt.Sprintf("%s: reading its interpreter: %v", p, err))
			continue
		}
		interp := strings.TrimRight(string(buf), "\x00")
		if _, err := t.Resolve(interp); err != nil {
			problems = append(problems, fmt.Sprintf("%s: interpreter %s missing", p, interp))
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return append(problems, fmt.Sprintf("%s: reading DT_NEEDED: %v", p, err))
	}
	dirs := runPaths(f, p)
	for _, lib := range needed {
		if !findLib(t, lib, dirs) {
			problems = append(problems, fmt.Sprintf("%s: needs %s, not in the image", p, lib))
		}
	}
	return problems
}

// runPaths are the file's DT_RUNPATH and DT_RPATH directories ($ORIGIN
// expanded), then the loader's defaults.
func runPaths(f *elf.File, p string) []string {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(d, "$ORIGIN", "/"+path.Dir(p))
				dirs = append(dirs, strings.TrimPrefix(path.Clean(d), "/"))
			}
		}
	}
	return append(dirs, libDirs...)
}

func findLib(t *Tree, lib string, dirs []string) bool {
	if strings.Contains(lib, "/") {
		_, err := t.Resolve(lib)
		return err == nil
	}
	for _, d := range dirs {
		if r, err := t.Resolve(path.Join(d, lib)); err == nil {
			if e, ok := t.Get(r); ok && e.Kind == File {
				return true
			}
		}
	}
	return false
}
