//go:build integration

package commands

import (
	"bytes"
	"strings"
	"testing"
)

// calicoMessages is the golden table of Calico's calicoctl messages for
// the common failures, taken from Calico's source (commit 87c15906:
// libcalico-go/lib/errors/errors.go for the words,
// libcalico-go/lib/backend/{etcdv3,k8s/resources/errors.go} for the key
// and the wrapped error, calicoctl/calicoctl/commands/crud_commands.go and
// get_command.go for the framing, resourcemgr/{resourcemgr,clusterinfo}.go
// for read-only kinds, calicoctl.go for printing the error alone). Each is
// the whole of stderr (stdout empty, exit 1) on etcd and on Kubernetes,
// whose API server's error Calico's client wraps.
var calicoMessages = []struct {
	name       string
	args       string
	stdin      string
	etcd, kube string
}{
	{name: "get missing", args: "get ippool nope",
		etcd: "resource does not exist: IPPool(nope) with error: <nil>\n",
		kube: "resource does not exist: IPPool(nope) with error: ippools.crd.projectcalico.org \"nope\" not found\n"},
	{name: "get missing namespaced", args: "get networkpolicy nope -n prod",
		etcd: "resource does not exist: NetworkPolicy(prod/nope) with error: <nil>\n",
		kube: "resource does not exist: NetworkPolicy(prod/nope) with error: networkpolicies.crd.projectcalico.org \"nope\" not found\n"},
	{name: "delete missing", args: "delete ippool nope",
		etcd: "Failed to delete 'IPPool' resource: resource does not exist: IPPool(nope) with error: <nil>\n\n",
		kube: "Failed to delete 'IPPool' resource: resource does not exist: IPPool(nope) with error: ippools.crd.projectcalico.org \"nope\" not found\n\n"},
	{name: "patch missing", args: `patch ippool nope -p {"spec":{"disabled":true}}`,
		etcd: "hit error: resource does not exist: IPPool(nope) with error: <nil>\n",
		kube: "hit error: resource does not exist: IPPool(nope) with error: ippools.crd.projectcalico.org \"nope\" not found\n"},
	{name: "create existing", args: "create -f -", stdin: wordsPool(""),
		etcd: "failed to create 'IPPool' resource: [resource already exists: IPPool(words-pool) with error: <nil>]\n",
		kube: "failed to create 'IPPool' resource: [resource already exists: IPPool(words-pool) with error: ippools.crd.projectcalico.org \"words-pool\" already exists]\n"},
	{name: "conflict", args: "apply -f -", stdin: wordsPool("1"),
		etcd: "failed to apply 'IPPool' resource: [update conflict: IPPool(words-pool)]\n",
		kube: "failed to apply 'IPPool' resource: [update conflict: IPPool(words-pool)]\n"},
	{name: "read-only apply", args: "apply -f -", stdin: clusterInfoDoc,
		etcd: "failed to apply 'ClusterInformation' resource: [operation apply is not supported on ClusterInformation: resource is readonly]\n"},
	{name: "read-only create", args: "create -f -", stdin: clusterInfoDoc,
		etcd: "failed to create 'ClusterInformation' resource: [operation create or apply is not supported on ClusterInformation]\n"},
	{name: "read-only delete", args: "delete clusterinformation default",
		etcd: "Failed to delete 'ClusterInformation' resource: operation delete is not supported on ClusterInformation\n\n"},
}

const clusterInfoDoc = "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata: {name: default}\nspec: {calicoVersion: v3.30.0}\n"

// wordsPool is an IPPool document, with a resourceVersion when rv is set.
func wordsPool(rv string) string {
	meta := "{name: words-pool}"
	if rv != "" {
		meta = "{name: words-pool, resourceVersion: '" + rv + "'}"
	}
	return "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: " + meta + "\nspec: {cidr: 10.99.0.0/16}\n"
}

// testCalicoWords runs the golden table on b: Tabby's calicoctl says what
// Calico's says, word for word.
func testCalicoWords(t *testing.T, b cliBackend) {
	if out, code := b.run(t, wordsPool(""), "apply", "-f", "-"); code != 0 {
		t.Fatalf("seeding the pool:\n%s", out)
	}
	for _, m := range calicoMessages {
		want := m.etcd
		if b.kind() == "kubernetes" && m.kube != "" {
			want = m.kube
		}
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(m.stdin), stdout: &out, stderr: &errOut,
			getenv: func(k string) string { return b.env[k] }, newClient: b.backends.New, defaultConfig: "/nonexistent/calicoctl.cfg"}
		args := strings.Fields(m.args)
		if strings.HasPrefix(m.args, "patch") { // the patch holds no spaces, but keep it one argument
			args = []string{"patch", "ippool", "nope", "-p", `{"spec":{"disabled":true}}`}
		}
		code := run(a, args)
		if code != 1 || out.Len() != 0 || errOut.String() != want {
			t.Errorf("%s: calicoctl %s: exit %d, stdout %q\nstderr %q\nwant   %q (Calico's)", m.name, m.args, code, out.String(), errOut.String(), want)
		}
	}
	if out, code := b.run(t, "", "delete", "ippool", "words-pool"); code != 0 {
		t.Fatalf("removing the pool:\n%s", out)
	}
}
