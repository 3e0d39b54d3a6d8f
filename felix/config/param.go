package config

import (
	"reflect"
	"strings"
)

// Class says what Tabby does with a setting.
type Class int

const (
	// Honoured settings take effect: live if the Param says so, else at
	// the next start (felix restarts itself when one changes).
	Honoured Class = iota
	// Refused settings are accepted only at the values in Param.Allowed
	// (what Tabby does); any other value is refused loudly and Tabby keeps
	// doing what Param.Reason says.
	Refused
)

func (c Class) String() string {
	if c == Honoured {
		return "honoured"
	}
	return "refused"
}

// Param is one setting.
type Param struct {
	// Name is Calico's parameter name: FELIX_<NAME> in the environment,
	// <Name> in felix.cfg (both case-insensitive).
	Name string
	// Field is the FelixConfigurationSpec field ("" for settings that
	// exist only locally).
	Field string
	// Kind is Calico's type of the setting (see kinds.go).
	Kind Kind
	// Default is Calico's default, as raw text ("" for none).
	Default string
	// Local settings are read from the environment and file only.
	Local bool
	// DieOnFail: a value that does not parse is fatal, as in Calico.
	DieOnFail bool
	// NonZero: "none" is not allowed.
	NonZero bool
	Class   Class
	// Live honoured settings are applied without a restart.
	Live bool
	// Allowed are the raw values a refused setting may take (parsed and
	// compared); nil means only the default.
	Allowed []string
	// Reason says, for a refused setting, why and what runs instead.
	Reason string
	// Security marks a refused setting that changes security or isolation
	// (encryption, what policy admits, who may read felix's endpoints):
	// running without it would be silently weaker than the operator asked,
	// so a refused value makes felix not ready and calicoctl refuses to
	// write it unless told --allow-unsupported. Flipping a setting to
	// Honoured (h in table.go) lifts both.
	Security bool
}

// Params are all of felix's settings (table.go), by lower-case name.
var byName = func() map[string]*Param {
	m := map[string]*Param{}
	for i := range Params {
		m[strings.ToLower(Params[i].Name)] = &Params[i]
	}
	return m
}()

// byField maps FelixConfigurationSpec field names to their setting.
var byField = func() map[string]*Param {
	m := map[string]*Param{}
	for i := range Params {
		if Params[i].Field != "" {
			m[Params[i].Field] = &Params[i]
		}
	}
	return m
}()

// Lookup returns the setting named name (case-insensitive).
func Lookup(name string) (*Param, bool) {
	p, ok := byName[strings.ToLower(name)]
	return p, ok
}

// ForField returns the setting of a FelixConfigurationSpec field.
func ForField(field string) (*Param, bool) {
	p, ok := byField[field]
	return p, ok
}

// EnvName is the environment variable of p.
func (p *Param) EnvName() string { return "FELIX_" + strings.ToUpper(p.Name) }

// allowed reports whether v (parsed) is a value Tabby implements.
func (p *Param) allowed(v any) bool {
	if p.Class == Honoured {
		return true
	}
	vals := p.Allowed
	if vals == nil {
		vals = []string{p.Default}
	}
	for _, raw := range vals {
		a, err := p.parse(raw)
		if err == nil && reflect.DeepEqual(a, v) {
			return true
		}
	}
	return false
}

// parse parses raw (not empty) as p's kind; "none" is the zero value.
func (p *Param) parse(raw string) (any, error) {
	if strings.EqualFold(raw, "none") {
		if p.NonZero {
			return nil, errNoneNonZero
		}
		return p.Kind.zero(), nil
	}
	if raw == "" {
		return p.Kind.zero(), nil
	}
	return p.Kind.Parse(raw)
}
