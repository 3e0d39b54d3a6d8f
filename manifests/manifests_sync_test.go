package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifestsMatchParts regenerates tabby.yaml and tabby-etcd.yaml from
// parts/ and crds/ into a temporary folder and fails when they differ from
// the committed ones: run `make generate` after changing a part or a CRD.
func TestManifestsMatchParts(t *testing.T) {
	tmp := t.TempDir()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "run", "./hack/manifestgen", "-out", tmp)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manifestgen: %v\n%s", err, out)
	}
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		want, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("manifests/%s is missing: run make generate", name)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("manifests/%s is out of date with manifests/parts or crds: run make generate", name)
		}
	}
}

// TestManifestRBACHasNoWildcards: every rule names its API groups,
// resources and verbs, and no ClusterRole grants Secrets.
func TestManifestRBACHasNoWildcards(t *testing.T) {
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		roles := 0
		for _, doc := range documents(t, name) {
			var role struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Rules []struct {
					APIGroups       []string `json:"apiGroups"`
					Resources       []string `json:"resources"`
					ResourceNames   []string `json:"resourceNames"`
					Verbs           []string `json:"verbs"`
					NonResourceURLs []string `json:"nonResourceURLs"`
				} `json:"rules"`
			}
			if err := yaml.Unmarshal(doc, &role); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if role.Kind != "ClusterRole" && role.Kind != "Role" {
				continue
			}
			roles++
			for i, r := range role.Rules {
				where := name + ": " + role.Kind + " " + role.Metadata.Name
				if len(r.NonResourceURLs) > 0 {
					t.Errorf("%s rule %d: grants non-resource URLs %v", where, i, r.NonResourceURLs)
				}
				if len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.Verbs) == 0 {
					t.Errorf("%s rule %d: names no API group, resource or verb", where, i)
				}
				for _, v := range append(append(append([]string{}, r.APIGroups...), r.Resources...), r.Verbs...) {
					if strings.Contains(v, "*") {
						t.Errorf("%s rule %d: wildcard %q", where, i, v)
					}
				}
				for _, res := range r.Resources {
					if res == "secrets" && (role.Kind == "ClusterRole" || len(r.ResourceNames) == 0) {
						t.Errorf("%s rule %d: Secrets granted beyond named Secrets of one namespace", where, i)
					}
				}
			}
		}
		if roles == 0 {
			t.Errorf("%s: no roles", name)
		}
	}
}

// documents splits a generated manifest into its YAML documents.
func documents(t *testing.T, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) == 0 || bytes.HasPrefix(bytes.TrimSpace(d), []byte("# Generated")) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// TestDockerfileHasWhatManifestsRun: every container of both manifests
// runs the image make image builds (tagged with VERSION) and a command the
// Dockerfile installs, and
// the CNI binaries install-cni needs are in its /opt/cni/bin.
func TestDockerfileHasWhatManifestsRun(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	installed := map[string]bool{}
	for _, line := range strings.Split(string(df), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "COPY" {
			continue
		}
		dst := f[len(f)-1]
		for _, src := range f[1 : len(f)-1] {
			installed[filepath.Join(dst, filepath.Base(src))] = true
		}
	}
	for _, bin := range []string{"calico", "calico-ipam", "calico-k8s", "portmap"} {
		if !installed["/opt/cni/bin/"+bin] {
			t.Errorf("the Dockerfile does not put %s in /opt/cni/bin", bin)
		}
	}
	version, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	image := "docker.io/tabbynet/tabby:" + strings.TrimSpace(string(version))
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		containers := 0
		for _, doc := range documents(t, name) {
			var w struct {
				Spec struct {
					Template struct {
						Spec struct {
							InitContainers []container `json:"initContainers"`
							Containers     []container `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &w); err != nil {
				t.Fatal(err)
			}
			ps := w.Spec.Template.Spec
			for _, c := range append(ps.InitContainers, ps.Containers...) {
				containers++
				if c.Image != image {
					t.Errorf("%s: container %s runs image %s, want %s (VERSION; make generate)", name, c.Name, c.Image, image)
				}
				var cmds []string
				if len(c.Command) > 0 {
					cmds = append(cmds, c.Command[0])
				}
				for _, p := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
					if p != nil && p.Exec != nil && len(p.Exec.Command) > 0 {
						cmds = append(cmds, p.Exec.Command[0])
					}
				}
				if len(c.Command) == 0 {
					t.Errorf("%s: container %s names no command", name, c.Name)
				}
				for _, cmd := range cmds {
					if !installed[cmd] {
						t.Errorf("%s: container %s runs %s, which the Dockerfile does not install", name, c.Name, cmd)
					}
				}
			}
		}
		if containers < 3 {
			t.Errorf("%s: %d containers, want install-cni, calico-node and kube-controllers", name, containers)
		}
	}
}

type probe struct {
	Exec *struct {
		Command []string `json:"command"`
	} `json:"exec"`
}

type container struct {
	Name           string   `json:"name"`
	Image          string   `json:"image"`
	Command        []string `json:"command"`
	LivenessProbe  *probe   `json:"livenessProbe"`
	ReadinessProbe *probe   `json:"readinessProbe"`
}

// TestGoldmaneHasNoAPIAccess: the flow aggregator reads nothing from the
// API server: no role is bound to its ServiceAccount and its pod mounts
// no token.
func TestGoldmaneHasNoAPIAccess(t *testing.T) {
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		found := false
		for _, doc := range documents(t, name) {
			var o struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Subjects []struct{ Kind, Name string } `json:"subjects"`
				Spec     struct {
					Template struct {
						Spec struct {
							ServiceAccountName           string `json:"serviceAccountName"`
							AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &o); err != nil {
				t.Fatal(err)
			}
			for _, s := range o.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == "goldmane" {
					t.Errorf("%s: %s %s binds a role to goldmane", name, o.Kind, o.Metadata.Name)
				}
			}
			if o.Kind == "Deployment" && o.Metadata.Name == "goldmane" {
				found = true
				ps := o.Spec.Template.Spec
				if ps.ServiceAccountName != "goldmane" || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
					t.Errorf("%s: goldmane runs as %q with token mounted %v", name, ps.ServiceAccountName, ps.AutomountServiceAccountToken)
				}
			}
		}
		if !found {
			t.Errorf("%s: no goldmane Deployment", name)
		}
	}
}
