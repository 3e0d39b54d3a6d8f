package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Source is where a value came from, in increasing precedence.
type Source int

const (
	SourceDefault Source = iota
	SourceGlobal         // FelixConfiguration "default"
	SourceNode           // FelixConfiguration "node.<name>"
	SourceFile           // /etc/calico/felix.cfg
	SourceEnv            // FELIX_* environment variables
)

func (s Source) String() string {
	return [...]string{"default", "FelixConfiguration default", "FelixConfiguration node", "config file", "environment"}[s]
}

// Sources are the raw inputs: the FELIX_* environment (names without the
// prefix, any case), the config file's keys, and the FelixConfiguration
// specs (nil when absent).
type Sources struct {
	Env          map[string]string
	File         map[string]string
	Node, Global *v3.FelixConfigurationSpec
}

// ProblemKind says what went wrong with a value.
type ProblemKind string

const (
	// ProblemRefused: a value Tabby does not implement.
	ProblemRefused ProblemKind = "refused"
	// ProblemInvalid: the value does not parse; the default is used (or,
	// for a die-on-fail setting, felix does not start).
	ProblemInvalid ProblemKind = "invalid"
	// ProblemUnknown: no such setting.
	ProblemUnknown ProblemKind = "unknown"
	// ProblemLocalOnly: a local-only setting from the datastore, ignored.
	ProblemLocalOnly ProblemKind = "local-only"
)

// Problem is one setting felix does not take as given.
type Problem struct {
	Setting string
	Source  Source
	Raw     string
	Kind    ProblemKind
	// Reason says why, and what runs instead.
	Reason string
	// Fatal problems stop felix (Calico's die-on-fail settings).
	Fatal bool
	// Security: a refused value of a Param marked Security; felix is not
	// ready while one is set.
	Security bool
}

func (p Problem) String() string {
	return fmt.Sprintf("%s=%q from %s: %s: %s", p.Setting, p.Raw, p.Source, p.Kind, p.Reason)
}

// Value is a setting's effective value and where it came from.
type Value struct {
	V      any
	Raw    string
	Source Source
}

// Settings are the resolved configuration.
type Settings struct {
	values   map[string]Value // by Param.Name
	Problems []Problem
}

// ErrFatal wraps the error Resolve returns for die-on-fail settings.
var ErrFatal = errors.New("invalid required configuration")

// Resolve merges the sources (see the package comment). The error, when
// not nil, wraps ErrFatal and names every fatal problem; the Settings are
// returned either way.
func Resolve(src Sources) (*Settings, error) {
	s := &Settings{values: map[string]Value{}}
	raw := map[Source]map[string]string{
		SourceEnv: lowerKeys(src.Env), SourceFile: lowerKeys(src.File),
		SourceNode: specRaw(src.Node), SourceGlobal: specRaw(src.Global),
	}
	for _, source := range []Source{SourceEnv, SourceFile} {
		for _, k := range sortedKeys(raw[source]) {
			if _, ok := byName[k]; !ok {
				s.Problems = append(s.Problems, Problem{Setting: k, Source: source, Raw: raw[source][k], Kind: ProblemUnknown,
					Reason: "felix has no such setting; ignored"})
			}
		}
	}
	var fatal []string
	for i := range Params {
		p := &Params[i]
		key := strings.ToLower(p.Name)
		val := Value{Raw: p.Default, Source: SourceDefault}
		for _, source := range []Source{SourceEnv, SourceFile, SourceNode, SourceGlobal} {
			v, ok := raw[source][key]
			if !ok || v == "" {
				continue
			}
			if p.Local && (source == SourceNode || source == SourceGlobal) {
				s.Problems = append(s.Problems, Problem{Setting: p.Name, Source: source, Raw: v, Kind: ProblemLocalOnly,
					Reason: "only the environment or the config file may set it; ignored"})
				continue
			}
			val = Value{Raw: v, Source: source}
			break
		}
		parsed, err := p.parse(val.Raw)
		if err != nil && val.Source != SourceDefault {
			pr := Problem{Setting: p.Name, Source: val.Source, Raw: val.Raw, Kind: ProblemInvalid, Fatal: p.DieOnFail}
			if p.DieOnFail {
				pr.Reason = err.Error() + "; felix cannot start with it"
				fatal = append(fatal, pr.String())
			} else {
				pr.Reason = fmt.Sprintf("%v; using the default %q", err, p.Default)
			}
			s.Problems = append(s.Problems, pr)
			val = Value{Raw: p.Default, Source: SourceDefault}
			parsed, err = p.parse(p.Default)
		}
		if err != nil {
			parsed = p.Kind.zero() // defaults that are empty text
		}
		val.V = parsed
		if val.Source != SourceDefault && !p.allowed(parsed) {
			s.Problems = append(s.Problems, Problem{Setting: p.Name, Source: val.Source, Raw: val.Raw, Kind: ProblemRefused, Reason: p.Reason, Security: p.Security})
		}
		s.values[p.Name] = val
	}
	if len(fatal) > 0 {
		return s, fmt.Errorf("%w: %s", ErrFatal, strings.Join(fatal, "; "))
	}
	return s, nil
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// specRaw turns the set fields of a FelixConfigurationSpec into raw
// values by setting name, in the text the setting's kind parses.
func specRaw(spec *v3.FelixConfigurationSpec) map[string]string {
	out := map[string]string{}
	if spec == nil {
		return out
	}
	sv := reflect.ValueOf(spec).Elem()
	st := sv.Type()
	for i := range st.NumField() {
		p, ok := byField[st.Field(i).Name]
		if !ok {
			continue
		}
		if s, set := fieldText(sv.Field(i), p.Kind); set {
			out[strings.ToLower(p.Name)] = s
		}
	}
	return out
}

// fieldText is the raw text of one spec field; set is false when the
// field is unset (nil or empty).
func fieldText(f reflect.Value, k Kind) (text string, set bool) {
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return "", false
		}
		f = f.Elem()
	} else if (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0 {
		return "", false
	}
	switch v := f.Interface().(type) {
	case metav1.Duration:
		if k.Name == KindMillis.Name {
			return strconv.FormatFloat(float64(v.Duration)/float64(time.Millisecond), 'f', -1, 64), true
		}
		return strconv.FormatFloat(v.Seconds(), 'f', -1, 64), true
	case []v3.ProtoPort:
		if len(v) == 0 {
			return "none", true
		}
		var items []string
		for _, pp := range v {
			item := strings.ToLower(pp.Protocol)
			if pp.Net != "" {
				if pr, err := netip.ParsePrefix(pp.Net); err == nil && pr.Addr().Is6() {
					item += ":[" + pp.Net + "]"
				} else {
					item += ":" + pp.Net
				}
			}
			items = append(items, item+":"+strconv.Itoa(int(pp.Port)))
		}
		return strings.Join(items, ","), true
	case []string:
		if len(v) == 0 {
			return "none", true
		}
		return strings.Join(v, ","), true
	case uint32:
		return "0x" + strconv.FormatUint(uint64(v), 16), true
	case fmt.Stringer:
		return v.String(), true
	}
	switch f.Kind() {
	case reflect.String:
		return f.String(), f.String() != ""
	case reflect.Bool:
		return strconv.FormatBool(f.Bool()), true
	case reflect.Int, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10), true
	}
	b, err := json.Marshal(f.Interface())
	if err != nil {
		return fmt.Sprint(f.Interface()), true
	}
	return string(b), true
}

// Get returns the value of a setting by its Calico name; it panics on an
// unknown name (a programming error the tests catch).
func (s *Settings) Get(name string) Value {
	p, ok := Lookup(name)
	if !ok {
		panic("felix/config: unknown setting " + name)
	}
	return s.values[p.Name]
}

// Bool, Int, Duration, String, Strings, Uint32, Ports and Regexp return a
// setting's value as its kind's type.
func (s *Settings) Bool(name string) bool              { return s.Get(name).V.(bool) }
func (s *Settings) Int(name string) int                { return s.Get(name).V.(int) }
func (s *Settings) Duration(name string) time.Duration { return s.Get(name).V.(time.Duration) }
func (s *Settings) String(name string) string          { return s.Get(name).V.(string) }
func (s *Settings) Strings(name string) []string       { return s.Get(name).V.([]string) }
func (s *Settings) Uint32(name string) uint32          { return s.Get(name).V.(uint32) }
func (s *Settings) Ports(name string) []PortSpec       { return s.Get(name).V.([]PortSpec) }
func (s *Settings) Regexp(name string) Regexp          { return s.Get(name).V.(Regexp) }
func (s *Settings) Addr(name string) netip.Addr        { return s.Get(name).V.(netip.Addr) }

// SecurityProblems are the refused values of security settings (see
// Param.Security): while there is one, felix is not ready.
func (s *Settings) SecurityProblems() []Problem {
	var out []Problem
	for _, p := range s.Problems {
		if p.Security {
			out = append(out, p)
		}
	}
	return out
}

// Refusals are the values of spec (a FelixConfiguration's) that felix
// refuses, as Resolve reports them with spec as the global configuration:
// what calicoctl warns about (and, for security settings, refuses) when
// the spec is written. Values that do not parse are left to validation.
func Refusals(spec *v3.FelixConfigurationSpec) []Problem {
	s, _ := Resolve(Sources{Global: spec})
	var out []Problem
	for _, p := range s.Problems {
		if p.Kind == ProblemRefused {
			out = append(out, p)
		}
	}
	return out
}

// IsSet reports whether a setting came from somewhere but the defaults.
func (s *Settings) IsSet(name string) bool { return s.Get(name).Source != SourceDefault }

// Changed returns the honoured settings whose effective value differs
// between old and s, split into those applied live and those that need a
// restart.
func (s *Settings) Changed(old *Settings) (live, restart []string) {
	for i := range Params {
		p := &Params[i]
		if p.Class != Honoured || reflect.DeepEqual(s.values[p.Name].V, old.values[p.Name].V) {
			continue
		}
		if p.Live {
			live = append(live, p.Name)
		} else {
			restart = append(restart, p.Name)
		}
	}
	return live, restart
}
