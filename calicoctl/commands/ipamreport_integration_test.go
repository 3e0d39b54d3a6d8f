//go:build integration

package commands

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// testIPAMCalicoReport: ipam show --show-borrowed, ipam check
// --show-all-ips/--show-problem-ips, and ipam release --from-report of a
// report in Calico's format (a fixture written from Calico's CheckReport
// definition): only the allocations the report calls not in use, and
// still allocated as it describes them, are freed; cooling-down ones,
// reassigned ones and live ones stay; a report of another cluster is
// refused. Tabby's own check -o writes that format.
func testIPAMCalicoReport(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	tmp := t.TempDir()
	var tr strings.Builder
	run := func(wantCode int, cmd string) string {
		t.Helper()
		out, code := b.run(t, "", strings.Fields(cmd)...)
		if code != wantCode {
			t.Errorf("calicoctl %s: exit %d, want %d\n%s", cmd, code, wantCode, out)
		}
		tr.WriteString(strings.ReplaceAll(out, tmp, "<tmp>") + "\n")
		return out
	}
	if out, code := b.run(t, "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: cr-pool}\nspec: {cidr: 10.51.0.0/24, blockSize: 29}\n", "apply", "-f", "-"); code != 0 {
		t.Fatal(out)
	}
	// Calico's reports name the cluster (ClusterInformation's GUID).
	if err := datastore.EnsureInitialized(w.ctx, w.c, "test", "k8s,bgp"); err != nil {
		t.Fatal(err)
	}
	al := ipam.New(w.c, ipam.Config{})
	assign := func(ip, handle, node, pod string) netip.Addr {
		t.Helper()
		a := netip.MustParseAddr(ip)
		attrs := map[string]string{ipam.AttrNode: node, ipam.AttrNamespace: "default", ipam.AttrPod: pod}
		if err := al.AssignIP(w.ctx, ipam.AssignIPArgs{IP: a, HandleID: handle, Hostname: node, Attrs: attrs}); err != nil {
			t.Fatalf("assigning %s: %v", ip, err)
		}
		return a
	}
	w.addNode("cr-node")
	live := assign("10.51.0.2", "k8s-pod-network.cr-live", "cr-node", "cr-live-pod")
	w.addPod("cr-node", "cr-live-pod", live)
	leak := assign("10.51.0.3", "k8s-pod-network.cr-leak", "cr-node", "cr-leak-pod")
	cooling := assign("10.51.0.4", "k8s-pod-network.cr-cooling", "cr-node", "cr-cooling-pod")
	reused := assign("10.51.0.5", "k8s-pod-network.cr-reused", "cr-node", "cr-reused-pod")
	anchor := assign("10.51.0.9", "k8s-pod-network.cr-anchor", "cr-node", "cr-anc-pod")
	w.addPod("cr-node", "cr-anc-pod", anchor)
	// Allocated for another node from cr-node's block: borrowed.
	borrowed := assign("10.51.0.12", "k8s-pod-network.cr-borrowed", "cr-other-node", "cr-borrowed-pod")
	orphan := &v3.IPAMHandle{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPAMHandle, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: ipam.HandleName("cr-orphan-handle")},
		Spec:       v3.IPAMHandleSpec{HandleID: "cr-orphan-handle", Block: map[string]int{}}}
	if _, err := w.c.Create(w.ctx, orphan); err != nil {
		t.Fatal(err)
	}

	run(0, "ipam show --show-borrowed")
	run(0, "ipam check --grace=0s --show-all-ips --show-problem-ips")

	// Tabby's report is Calico's format (every key Calico's CheckReport
	// has, Tabby's findings under "tabby").
	tabbyReport := filepath.Join(tmp, "tabby.json")
	run(0, "ipam check --grace=0s -o "+tabbyReport)
	data, err := os.ReadFile(tabbyReport)
	if err != nil {
		t.Fatal(err)
	}
	var rep calicoReport
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("Tabby's report is not Calico's format: %v", err)
	}
	ci, err := w.c.Get(w.ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	guid := ci.(*v3.ClusterInformation).Spec.ClusterGUID
	if rep.ClusterGUID != guid || rep.ClusterInfoRevision != ci.GetResourceVersion() || rep.Tabby == nil {
		t.Errorf("report metadata: guid %q rev %q, want %q %q, with tabby findings", rep.ClusterGUID, rep.ClusterInfoRevision, guid, ci.GetResourceVersion())
	}
	for ip, wantInUse := range map[netip.Addr]bool{live: true, anchor: true, leak: false, borrowed: false} {
		got := rep.Allocations[ip.String()]
		if len(got) != 1 || got[0].InUse != wantInUse || got[0].SequenceNumber == nil {
			t.Errorf("report allocation %s: %+v, want one with inUse %v and a sequence number", ip, got, wantInUse)
		}
	}
	if b := rep.Allocations[borrowed.String()]; len(b) == 1 && (!b[0].Borrowed || b[0].Node != "cr-other-node") {
		t.Errorf("borrowed allocation not marked: %+v", b[0])
	}
	if len(rep.LeakedHandles) != 1 || rep.LeakedHandles[0].ID != "cr-orphan-handle" {
		t.Errorf("leakedHandles = %+v", rep.LeakedHandles)
	}

	// A report in Calico's format, filled in for this cluster.
	seqs := map[netip.Addr]uint64{}
	als, err := al.ListAllocations(w.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range als {
		seqs[a.IP] = a.Seq
	}
	fill := func(path, guid string) {
		t.Helper()
		tm := template.Must(template.ParseFiles("testdata/ipamreport/calico-report.json.tmpl"))
		var buf bytes.Buffer
		if err := tm.Execute(&buf, map[string]any{
			"GUID": guid, "CIRevision": ci.GetResourceVersion(),
			"Live": live, "LiveSeq": seqs[live], "Leak": leak, "LeakSeq": seqs[leak],
			"Cooling": cooling, "CoolingSeq": seqs[cooling],
			"Reused": reused, "ReusedSeqBefore": seqs[reused] + 1000,
			"Borrowed": borrowed, "BorrowedSeq": seqs[borrowed],
		}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(tmp, "other-cluster.json")
	fill(other, "6a2f0c9e-0000-4000-8000-000000000000")
	run(1, "ipam release --from-report="+other)
	calico := filepath.Join(tmp, "calico.json")
	fill(calico, guid)
	run(0, "ipam release --from-report="+calico+" --grace=0s --log-level=info")
	want := []string{live.String() + " k8s-pod-network.cr-live", cooling.String() + " k8s-pod-network.cr-cooling",
		reused.String() + " k8s-pod-network.cr-reused", anchor.String() + " k8s-pod-network.cr-anchor"}
	slices.Sort(want)
	var got []string
	for _, a := range w.allocated() {
		if strings.HasPrefix(a, "10.51.") {
			got = append(got, a)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("after release from Calico's report: %v, want %v", got, want)
	}
	if _, err := w.c.Get(w.ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: ipam.HandleName("cr-orphan-handle")}); !isNotFound(err) {
		t.Errorf("the report's leaked handle is still there: %v", err)
	}
	// Released already: a second run frees nothing.
	run(0, "ipam release --from-report="+calico+" --grace=0s")

	w.deletePod("cr-node", "cr-live-pod")
	w.deletePod("cr-node", "cr-anc-pod")
	run(0, "ipam release --force --ip="+live.String()+","+cooling.String()+","+reused.String()+","+anchor.String())
	run(0, "delete ippool cr-pool")
	checkGolden(t, "ipam-calico-report", tr.String())
}

// testNodeASN: get nodes -o wide shows, for a node without its own AS
// number, the cluster's (BGPConfiguration default), not a fixed 64512.
func testNodeASN(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	if w.kube != nil {
		_, err := w.kube.CoreV1().Nodes().Create(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "asn-node",
			Annotations: map[string]string{"projectcalico.org/IPv4Address": "192.168.5.1/24"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		n := &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "asn-node"},
			Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "192.168.5.1/24"}}}
		if _, err := w.c.Create(w.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	defer w.deleteNode("asn-node")
	var tr strings.Builder
	for _, s := range []step{
		{args: args("get node asn-node -o wide")},
		{args: args("apply -f -"), stdin: "apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: {name: default}\nspec: {asNumber: 64600}\n"},
		{args: args("get node asn-node -o wide")},
		{args: args("get node asn-node -o custom-columns=NAME,ASN")},
		{args: args("delete bgpconfig default")},
	} {
		out, code := b.run(t, s.stdin, s.args...)
		if code != s.wantCode {
			t.Errorf("exit %d:\n%s", code, out)
		}
		tr.WriteString(out + "\n")
	}
	checkGolden(t, "nodes-asn", tr.String())
}
