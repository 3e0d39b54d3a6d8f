package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestNoMutablePackageWiring: no exported package-level variable, of
// this module or any other, is assigned (or has a field, element or
// pointee assigned) outside a main package or a test. Wiring passes
// values explicitly; a component that another embeds (calico-node runs
// felix and confd in one process) must not change state the other reads.
// Generated code (protoc's registration of its file descriptor) is left
// out: it is not wiring.
func TestNoMutablePackageWiring(t *testing.T) {
	files := moduleFiles(t)
	idx := newVarIndex(t, files)
	var found []string
	for _, f := range files {
		if f.test || f.pkgName() == "main" || ast.IsGenerated(f.ast) {
			continue
		}
		found = append(found, assignedPackageVars(f, idx)...)
	}
	for _, s := range found {
		t.Errorf("exported package variable assigned outside main or a test: %s", s)
	}
}

// assignedPackageVars lists the file's assignments to exported
// package-level variables ("path:line: pkg.Var").
func assignedPackageVars(f *file, idx *varIndex) []string {
	imports := f.imports()
	var found []string
	check := func(lhs ast.Expr, pos token.Pos) {
		if name, ok := packageVar(lhs, f, imports, idx); ok {
			found = append(found, fmt.Sprintf("%s:%d: %s", f.path, lineOf(f, pos), name))
		}
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if s.Tok != token.DEFINE {
				for _, lhs := range s.Lhs {
					check(lhs, s.Pos())
				}
			}
		case *ast.IncDecStmt:
			check(s.X, s.Pos())
		case *ast.RangeStmt:
			if s.Tok == token.ASSIGN {
				for _, e := range []ast.Expr{s.Key, s.Value} {
					if e != nil {
						check(e, s.Pos())
					}
				}
			}
		}
		return true
	})
	return found
}

// lineOf is pos's line in the file.
func lineOf(f *file, pos token.Pos) int { return f.fset.Position(pos).Line }

// packageVar says whether the assigned expression e is (part of) an
// exported package-level variable: another package's pkg.Var, or the
// file's own package's Var not shadowed by a local.
func packageVar(e ast.Expr, f *file, imports map[string]string, idx *varIndex) (string, bool) {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
			continue
		case *ast.StarExpr:
			e = x.X
			continue
		case *ast.IndexExpr:
			e = x.X
			continue
		case *ast.IndexListExpr:
			e = x.X
			continue
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Obj == nil {
				if path, ok := imports[id.Name]; ok {
					if idx.vars(path)[x.Sel.Name] {
						return id.Name + "." + x.Sel.Name, true
					}
					return "", false
				}
			}
			e = x.X
			continue
		case *ast.Ident:
			if !x.IsExported() {
				return "", false
			}
			if x.Obj != nil {
				// Resolved in this file: a package-level var
				// declared here, or a local.
				if x.Obj.Kind == ast.Var && isTopLevel(f.ast, x.Obj.Decl) {
					return x.Name, true
				}
				return "", false
			}
			// Unresolved: declared in another file of the package
			// (or a universe name, which is never a var).
			if idx.vars(f.dir)[x.Name] {
				return x.Name, true
			}
			return "", false
		default:
			return "", false
		}
	}
}

// isTopLevel says whether decl is one of the file's package-level
// declarations.
func isTopLevel(f *ast.File, decl any) bool {
	spec, ok := decl.(*ast.ValueSpec)
	if !ok {
		return false
	}
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok {
			for _, s := range gd.Specs {
				if s == spec {
					return true
				}
			}
		}
	}
	return false
}

// TestPackageVarScanner: the scanner finds what it must (so the rule
// above cannot pass by finding nothing) and leaves locals alone.
func TestPackageVarScanner(t *testing.T) {
	src := `package p

import (
	"net/http"
	ds "github.com/tabbynet/tabby/datastore/dsconfig"
)

var Hook func()
var private int

func f(Hook2 func()) {
	Hook = nil
	Hook2 = nil
	private = 1
	http.DefaultClient.Timeout = 0
	http.DefaultTransport = nil
	ds.DefaultConfigFile2 = ""
	local := struct{ X int }{}
	local.X = 1
	var Shadow int
	Shadow = 2
	_ = Shadow
	for Hook = range []func(){} {
	}
	http.Handle("/", nil)
}
`
	got := scanSource(t, src)
	want := []string{"p.go:12: Hook", "p.go:15: http.DefaultClient", "p.go:16: http.DefaultTransport", "p.go:23: Hook"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// scanSource runs the scanner over one file of a package of its own.
func scanSource(t *testing.T, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	a, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &file{path: "p.go", dir: module + "/internal/archtest/p", ast: a, fset: fset}
	return assignedPackageVars(f, newVarIndex(t, []*file{f}))
}
