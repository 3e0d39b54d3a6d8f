package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func newConvertCmd(a *app) *cobra.Command {
	var (
		files  []string
		output string
	)
	cmd := &cobra.Command{
		Use:   "convert -f FILENAME",
		Short: "Convert Kubernetes NetworkPolicy YAML to the Calico NetworkPolicy Tabby enforces",
		Long: `Print the Calico NetworkPolicy (named knp.default.<name>) that a
Kubernetes networking.k8s.io/v1 NetworkPolicy becomes, exactly as the
Kubernetes datastore converts it. Needs no datastore.`,
		Example: `  calicoctl convert -f k8s-policy.yaml
  calicoctl convert -f k8s-policy.yaml -o json
  kubectl get networkpolicy web -o yaml | calicoctl convert -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "yaml" && output != "json" {
				return fmt.Errorf("output format %q is not supported by convert: use yaml or json", output)
			}
			if len(files) == 0 {
				return fmt.Errorf("no input: pass -f FILE or -f - (a Kubernetes NetworkPolicy)")
			}
			var out []v3.Resource
			var problems []string
			for _, f := range files {
				data, err := a.readSource(f)
				if err != nil {
					return err
				}
				pols, probs := convertK8sPolicies(f, data)
				out = append(out, pols...)
				problems = append(problems, probs...)
			}
			if len(problems) > 0 {
				return fmt.Errorf("nothing was converted; fix these first:\n  %s", strings.Join(problems, "\n  "))
			}
			if len(out) == 0 {
				return fmt.Errorf("no NetworkPolicy found in %s", strings.Join(files, ", "))
			}
			info, _ := v3.LookupKind(v3.KindNetworkPolicy)
			p, _ := newPrinter(output, false)
			return p.print(a.stdout, info, out, len(out) != 1, nil)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file with Kubernetes NetworkPolicy YAML or JSON, or - for stdin (repeatable)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

// convertK8sPolicies converts every document of one file, returning the
// policies and, naming file and document, every problem.
func convertK8sPolicies(file string, data []byte) ([]v3.Resource, []string) {
	var out []v3.Resource
	var problems []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			return out, problems
		}
		where := fmt.Sprintf("%s: document %d", file, doc)
		if err != nil {
			return out, append(problems, fmt.Sprintf("%s: %v", where, err))
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc--
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			problems = append(problems, fmt.Sprintf("%s: not valid YAML: %v", where, err))
			continue
		}
		if head.APIVersion != "networking.k8s.io/v1" || head.Kind != "NetworkPolicy" {
			problems = append(problems, fmt.Sprintf("%s: kind %q apiVersion %q: convert takes a Kubernetes NetworkPolicy (apiVersion: networking.k8s.io/v1, kind: NetworkPolicy)", where, head.Kind, head.APIVersion))
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict(raw, &np); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		if np.Name == "" {
			problems = append(problems, fmt.Sprintf("%s: metadata.name is required", where))
			continue
		}
		if np.Namespace == "" {
			np.Namespace = "default" // as kubectl would create it
		}
		// The result is a new object, not a read of a stored one.
		np.UID, np.ResourceVersion, np.CreationTimestamp = "", "", metav1.Time{}
		pol, err := kdd.K8sNetworkPolicyToCalico(&np)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (NetworkPolicy %q): %v", where, np.Name, err))
			continue
		}
		out = append(out, pol)
	}
}

func stripComments(b []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}
