package commands

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	felixconfig "github.com/tabbynet/tabby/felix/config"
)

// unsupported is a value Tabby accepts in the datastore but does not
// honour: a FelixConfiguration setting felix refuses (felix/config's
// table, which felix itself reports from: one table, so a setting made
// honoured there is accepted here too).
type unsupported struct {
	where    string // FelixConfiguration "default"
	field    string // the spec's JSON name, e.g. wireguardEnabled
	raw      string
	reason   string // why, and what runs instead
	security bool
}

func (u unsupported) String() string {
	return fmt.Sprintf("%s: %s: %s is not supported by Tabby: %s", u.where, u.field, u.raw, u.reason)
}

// unsupportedIn lists r's values Tabby does not honour (none for kinds
// without such fields).
func unsupportedIn(r v3.Resource) []unsupported {
	fc, ok := r.(*v3.FelixConfiguration)
	if !ok {
		return nil
	}
	var out []unsupported
	for _, p := range felixconfig.Refusals(&fc.Spec) {
		out = append(out, unsupported{where: fmt.Sprintf("%s %q", v3.KindFelixConfiguration, fc.Name),
			field: specJSONName(p.Setting), raw: p.Raw, reason: p.Reason, security: p.Security})
	}
	return out
}

// specJSONName is the FelixConfigurationSpec JSON name of a felix setting.
func specJSONName(setting string) string {
	p, ok := felixconfig.Lookup(setting)
	if !ok || p.Field == "" {
		return setting
	}
	f, ok := reflect.TypeFor[v3.FelixConfigurationSpec]().FieldByName(p.Field)
	if !ok {
		return setting
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// checkUnsupported warns on stderr about every value of r Tabby does not
// honour, naming what runs instead, and refuses (an error) a security
// setting among them (see felix/config's Param.Security) unless
// --allow-unsupported was given or known (stored before, so a patch of
// another field or a label does not trip over it again).
func (a *app) checkUnsupported(r v3.Resource, known []unsupported) error {
	var refused []string
	for _, u := range unsupportedIn(r) {
		fmt.Fprintln(a.stderr, "Warning:", u)
		if u.security && !a.allowUnsupported && !containsSetting(known, u) {
			refused = append(refused, fmt.Sprintf("%s: %s", u.field, u.raw))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%s %q: %s would make the cluster less secure than it says (Tabby cannot honour %s, and felix would not be ready on the nodes it applies to); remove %s, or give --allow-unsupported to write it anyway",
		v3.KindOf(r), r.GetName(), strings.Join(refused, ", "), plural(len(refused), "it", "them"), plural(len(refused), "it", "them"))
}

func containsSetting(us []unsupported, u unsupported) bool {
	for _, k := range us {
		if k.field == u.field && k.raw == u.raw {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// addAllowUnsupportedFlag adds --allow-unsupported to a writing command.
func addAllowUnsupportedFlag(cmd *cobra.Command, a *app) {
	cmd.Flags().BoolVar(&a.allowUnsupported, "allow-unsupported", false,
		"Write security settings Tabby cannot honour (e.g. FelixConfiguration wireguardEnabled); felix is not ready while they are set.")
}
