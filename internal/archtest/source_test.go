package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// module is this module's path.
const module = "github.com/tabbynet/tabby"

// file is one parsed Go file of the module.
type file struct {
	path string // relative to the module root, slash-separated
	dir  string // import path of its package directory
	test bool   // a _test.go file
	ast  *ast.File
	fset *token.FileSet
}

// pkgName is the package clause's name.
func (f *file) pkgName() string { return f.ast.Name.Name }

// imports maps the file's names for imported packages to their paths.
// A package imported without a name is named by its path's last element
// (a major version suffix /vN or .vN and a go- prefix left out), which is
// its package clause's name for every package this module imports.
func (f *file) imports() map[string]string {
	m := map[string]string{}
	for _, spec := range f.ast.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		parts := strings.Split(p, "/")
		name := parts[len(parts)-1]
		if isMajorVersion(name) && len(parts) > 1 {
			name = parts[len(parts)-2]
		}
		if i := strings.Index(name, ".v"); i > 0 {
			name = name[:i]
		}
		name = strings.TrimPrefix(name, "go-")
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if name != "_" && name != "." {
			m[name] = p
		}
	}
	return m
}

func isMajorVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	_, err := strconv.Atoi(s[1:])
	return err == nil
}

var (
	loadOnce sync.Once
	loaded   []*file
	loadErr  error
)

// moduleFiles parses every .go file of the module once (vendor/,
// testdata/ and hidden directories left out).
func moduleFiles(t *testing.T) []*file {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = parseModule(filepath.Join("..", "..")) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if len(loaded) < 100 {
		t.Fatalf("only %d Go files found: not the module root", len(loaded))
	}
	return loaded
}

func parseModule(root string) ([]*file, error) {
	fset := token.NewFileSet()
	var files []*file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := module
		if d := filepath.ToSlash(filepath.Dir(rel)); d != "." {
			dir += "/" + d
		}
		files = append(files, &file{path: rel, dir: dir, test: strings.HasSuffix(name, "_test.go"), ast: f, fset: fset})
		return nil
	})
	return files, err
}

// exportedVars returns the exported package-level variables declared in
// files (one package's).
func exportedVars(files []*ast.File) map[string]bool {
	vars := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if n.IsExported() {
						vars[n.Name] = true
					}
				}
			}
		}
	}
	return vars
}

// varIndex answers which names are exported package-level variables of
// a package: the module's from the parsed files, others' from their
// source, found with go list.
type varIndex struct {
	t     *testing.T
	own   map[string][]*ast.File // import path -> non-test files
	cache map[string]map[string]bool
}

func newVarIndex(t *testing.T, files []*file) *varIndex {
	own := map[string][]*ast.File{}
	for _, f := range files {
		if !f.test {
			own[f.dir] = append(own[f.dir], f.ast)
		}
	}
	return &varIndex{t: t, own: own, cache: map[string]map[string]bool{}}
}

func (x *varIndex) vars(importPath string) map[string]bool {
	if v, ok := x.cache[importPath]; ok {
		return v
	}
	files, ok := x.own[importPath]
	if !ok {
		files = x.external(importPath)
	}
	v := exportedVars(files)
	x.cache[importPath] = v
	return v
}

// external parses the package's non-test files as the go command builds
// them here.
func (x *varIndex) external(importPath string) []*ast.File {
	x.t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}\n{{join .GoFiles \"\\n\"}}", importPath).Output()
	if err != nil {
		x.t.Fatalf("go list %s: %v", importPath, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range lines[1:] {
		src, err := os.ReadFile(filepath.Join(lines[0], name))
		if err != nil {
			x.t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			x.t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
