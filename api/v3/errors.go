package v3

import (
	"strconv"
	"strings"
)

// Path is a field path such as spec.ingress[0].source.nets[1]. It is built
// with Child and Index and printed as users read it in YAML.
type Path string

// Child returns the path of a named field below p.
func (p Path) Child(name string) Path {
	if p == "" {
		return Path(name)
	}
	return Path(string(p) + "." + name)
}

// Index returns the path of element i of the list at p.
func (p Path) Index(i int) Path { return Path(string(p) + "[" + strconv.Itoa(i) + "]") }

// Key returns the path of map key k of the map at p.
func (p Path) Key(k string) Path { return Path(string(p) + "[" + strconv.Quote(k) + "]") }

// FieldError says what is wrong with one field.
// +kubebuilder:object:generate=false
type FieldError struct {
	Path Path
	Msg  string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return string(e.Path) + ": " + e.Msg
}

// ErrorList collects every FieldError found in a resource. A nil or empty
// list means the resource is valid.
// +kubebuilder:object:generate=false
type ErrorList []FieldError

// Add appends an error for path p.
func (l *ErrorList) Add(p Path, msg string) { *l = append(*l, FieldError{Path: p, Msg: msg}) }

// Addf appends an error for path p, formatted like fmt.Sprintf.
func (l *ErrorList) Addf(p Path, format string, args ...any) {
	l.Add(p, sprintf(format, args...))
}

// Extend appends the errors of another list.
func (l *ErrorList) Extend(o ErrorList) { *l = append(*l, o...) }

// Err returns the list as an error, or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}
