package commands

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func newValidateCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|- [-f ...]",
		Short: "Decode, default and validate resource YAML without touching a datastore",
		Long: `Decode every document strictly (unknown fields are errors), apply Calico's
defaults and validate. Prints one line per resource and every error with its
field path. Exits non-zero when any document is invalid.`,
		Example: `  calicoctl validate -f ippool.yaml
  calicoctl validate -f policies/
  cat policy.yaml | calicoctl validate -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no input: pass -f FILE, -f DIR or -f -")
			}
			bad := 0
			var pools []v3.Resource // valid IPPools of every input, for the overlap check
			var where []string
			for _, f := range expandInputs(files) {
				n, valid, err := validateInput(cmd, f)
				if err != nil {
					return err
				}
				bad += n
				for _, r := range valid {
					if p, ok := r.(*v3.IPPool); ok {
						pools = append(pools, p)
						where = append(where, f+": IPPool "+p.Name)
					}
				}
			}
			// Pools valid on their own may still overlap each other,
			// which the datastore would refuse.
			for i, errs := range sortedByKey(poolOverlaps(pools)) {
				for _, fe := range errs {
					cmd.PrintErrf("%s: %s\n", where[i], fe.Error())
				}
				bad++
			}
			if bad > 0 {
				return fmt.Errorf("%d invalid resource(s)", bad)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory of *.yaml/*.yml/*.json, or - for stdin")
	return cmd
}

// expandInputs turns directories into their YAML/JSON files, sorted.
func expandInputs(in []string) []string {
	var out []string
	for _, f := range in {
		st, err := os.Stat(f)
		if f == "-" || err != nil || !st.IsDir() {
			out = append(out, f)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
			m, _ := filepath.Glob(filepath.Join(f, pat))
			found = append(found, m...)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out
}

// validateInput validates one file and returns how many resources in it
// are invalid, and the valid ones (defaulted). A file that cannot be read
// or decoded counts as one.
func validateInput(cmd *cobra.Command, name string) (int, []v3.Resource, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	rs, err := v3.DecodeYAML(data)
	if err != nil {
		cmd.PrintErrf("%s: %v\n", name, err)
		return 1, nil, nil
	}
	bad := 0
	var valid []v3.Resource
	for _, r := range rs {
		kind := r.GetObjectKind().GroupVersionKind().Kind
		id := kind + " " + r.GetName()
		if ns := r.GetNamespace(); ns != "" {
			id = kind + " " + ns + "/" + r.GetName()
		}
		if err := v3.DefaultValidateForWrite(r); err != nil {
			bad++
			for _, fe := range err.(v3.ErrorList) {
				cmd.PrintErrf("%s: %s: %s\n", name, id, fe.Error())
			}
			continue
		}
		cmd.Printf("%s: %s: valid\n", name, id)
		valid = append(valid, r)
	}
	return bad, valid, nil
}
