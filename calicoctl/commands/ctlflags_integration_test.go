//go:build integration

package commands

import "testing"

// ctlFlagScenarios are the golden transcripts of Calico calicoctl's flags
// and output formats (issue 18), the same on every datastore except where
// a flag only means something to one (--context).
func ctlFlagScenarios(t *testing.T, b cliBackend) {
	td := "testdata/cli/"
	cliScenario(t, b, "files", []step{
		// A directory is read one level deep; -R walks it all.
		{args: args("apply -f " + td + "tree")},
		{args: args("apply -R -f " + td + "tree")},
		{args: args("apply --recursive -f " + td + "tree/sub")},
		{args: args("create -f " + td + "empty.yaml"), wantCode: 1},
		{args: args("create -f " + td + "empty.yaml --skip-empty")},
		{args: args("apply -f " + td + "empty-dir"), wantCode: 1},
		{args: args("apply -f " + td + "empty-dir --skip-empty")},
		{args: args("delete -R -f " + td + "tree")},
	})
	cliScenario(t, b, "output", []step{
		{args: args("apply -R -f " + td + "tree")},
		{args: args("apply -f " + td + "pools.yaml")},
		{args: args("get bgpconfig")},
		{args: args("get bgpconfigurations -o wide")},
		{args: args("get hep")},
		{args: args("get hep -o wide")},
		{args: args("get networkpolicies -a")},
		{args: args("get ippools -o wide")},
		{args: args("get ippool pool-a deep-pool")},
		{args: args("get ippool pool-a deep-pool -o yaml --export")},
		// What get prints for several names (a sequence) applies again.
		{args: args("apply -f -"), stdin: "- apiVersion: projectcalico.org/v3\n  kind: IPPool\n  metadata: {name: seq-pool}\n  spec: {cidr: 10.88.0.0/16}\n- apiVersion: projectcalico.org/v3\n  kind: IPPool\n  metadata: {name: seq-pool-2}\n  spec: {cidr: 10.89.0.0/16}\n"},
		{args: args("delete ippool seq-pool seq-pool-2")},
		{args: args("get ippools -o custom-columns=NAME,CIDR,ASSIGNMENTMODE")},
		{args: args("get bgpconfigurations -o yaml")},
		{args: args("get hostendpoints -o json")},
		{args: args("get ippool pool-b -o custom-columns=CIDR,VXLANMODE")},
		{args: args("get ippools -o custom-columns=NAME,BOGUS"), wantCode: 1},
		{args: args("get ippools -o custom-columns="), wantCode: 1},
		{args: []string{"get", "ippools", "-o", `go-template={{range .}}{{range .Items}}{{.ObjectMeta.Name}}={{.Spec.CIDR}}{{"\n"}}{{end}}{{end}}`}},
		{args: []string{"get", "ippool", "pool-a", "pool-b", "-o", `go-template={{range .}}{{.Kind}}/{{.ObjectMeta.Name}} labels={{join .ObjectMeta.Labels ","}}{{"\n"}}{{end}}`}},
		{args: args("get ippools -o go-template-file=" + td + "names.tmpl")},
		{args: args("get ippools -o go-template="), wantCode: 1},
		{args: args("get ippools -o go-template-file="), wantCode: 1},
		{args: args("get ippools -o go-template-file=" + td + "no-such.tmpl"), wantCode: 1},
		{args: []string{"get", "ippools", "-o", "go-template={{.Nope"}, wantCode: 1},
		{args: args("get hostendpoint node1-eth0 -o yaml --export")},
		{args: args("get ippool pool-b -o json --export")},
		{args: args("delete -R -f " + td + "tree")},
		{args: args("delete -f " + td + "pools.yaml")},
	})
	cliScenario(t, b, "patch", []step{
		{args: args("apply -f " + td + "pools.yaml")},
		{args: args("patch ippool pool-a -t strategic -p {\"spec\":{\"disabled\":true}}")},
		{args: args("patch ippool pool-a -t merge -p {\"spec\":{\"natOutgoing\":null},\"metadata\":{\"labels\":{\"tier\":\"gold\"}}}")},
		{args: []string{"patch", "ippool", "pool-a", "-t", "json", "-p", `[{"op":"replace","path":"/spec/disabled","value":false},{"op":"add","path":"/spec/allowedUses","value":["Workload"]}]`}},
		{args: args("get ippool pool-a -o yaml --export")},
		{args: []string{"patch", "ippool", "pool-a", "-t", "json", "-p", `[{"op":"remove","path":"/spec/nope"}]`}, wantCode: 1},
		{args: args("patch ippool pool-a -t json -p {\"spec\":{}}"), wantCode: 1},
		{args: []string{"patch", "ippool", "pool-a", "-p", `[{"op":"add","path":"/spec/disabled","value":true}]`}, wantCode: 1},
		{args: args("patch ippool pool-a -t bogus -p {}"), wantCode: 1},
		{args: args("delete -f " + td + "pools.yaml")},
	})
	cliScenario(t, b, "global-flags", []step{
		{args: args("get ippools --log-level bogus"), wantCode: 1},
		{args: args("get ippools --log-level error")},
		{args: args("get ippools -l panic -o name")},
		{setup: seedClusterInfo("v3.29.2", "k8s,bgp")},
		{args: args("get ippools"), version: "v3.30.1", wantCode: 1},
		{args: args("get ippools --allow-version-mismatch"), version: "v3.30.1"},
		{args: args("ipam show"), version: "v3.30.1", wantCode: 1},
		{args: args("ipam show --allow-version-mismatch"), version: "v3.30.1"},
		{args: args("get ippools -o name"), version: "v3.29.2-0.dev-12-gabc"},
		{args: args("validate -f " + td + "pools.yaml"), version: "v3.30.1"},
		{args: args("version"), version: "v3.30.1"},
		{args: args("version --client"), version: "v3.30.1"},
		{args: args("version --poll=often"), wantCode: 1},
	})
	cliScenario(t, b, "migrate-lock", []step{
		{args: args("datastore migrate lock")},
		{args: args("get clusterinformation -o custom-columns=NAME,DATASTOREREADY")},
		{args: args("datastore migrate lock")},
		{args: args("datastore migrate unlock")},
		{args: args("get clusterinformation -o custom-columns=NAME,DATASTOREREADY")},
		{args: args("datastore migrate frobnicate"), wantCode: 1},
		{args: args("ipam split 2 --name ipam-v4"), wantCode: 1},
	})
	cliScenario(t, b, "context-"+b.kind(), []step{
		// Calico sets K8S_CURRENT_CONTEXT from --context: the Kubernetes
		// datastore uses that kubeconfig context, etcd has none to pick.
		{args: args("get ippools -o name --context no-such-context"), wantCode: map[string]int{"etcd": 0, "kubernetes": 1}[b.kind()]},
		{args: args("get ippools -o name --context test")},
	})
}
