//go:build integration

package commands

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// testPoolOverlap: overlapping pools are refused by create, apply and
// validate, naming both pools; blocks that overlap anyway (written by an
// older IPAM or by hand) and an address allocated in both are reported by
// ipam check and in its -o report.
func testPoolOverlap(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	tmp := t.TempDir()
	report := filepath.Join(tmp, "report.json")
	var tr strings.Builder
	run := func(stdin string, wantCode int, cmd string) {
		t.Helper()
		out, code := b.run(t, stdin, strings.Fields(cmd)...)
		if code != wantCode {
			t.Errorf("calicoctl %s: exit %d, want %d\n%s", cmd, code, wantCode, out)
		}
		tr.WriteString(strings.ReplaceAll(out, tmp, "<tmp>") + "\n")
	}
	big := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: ov-big}\nspec: {cidr: 10.60.0.0/20, blockSize: 24}\n"
	small := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: ov-small}\nspec: {cidr: 10.60.0.0/24, blockSize: 28}\n"
	run(big+"---\n"+small, 1, "create -f -")
	run(big+"---\n"+small, 1, "validate -f -")
	run(big, 0, "create -f -")
	run(small, 1, "create -f -")
	run(small, 1, "apply -f -")
	run(big+"---\n"+small, 1, "apply -f -")
	run("", 0, "get ippools")

	// Blocks of both sizes over the same addresses, each holding
	// 10.60.0.1 under its own handle, as two nodes got them before.
	for _, bl := range []struct{ cidr, node, handle string }{
		{"10.60.0.0/24", "ov-node-a", "ov-handle-a"},
		{"10.60.0.0/28", "ov-node-b", "ov-handle-b"},
	} {
		cidr := netip.MustParsePrefix(bl.cidr)
		blk := ipam.NewBlock(cidr, bl.node, metav1.Now())
		if err := ipam.AssignOrdinal(blk, netip.MustParseAddr("10.60.0.1"), bl.handle, nil); err != nil {
			t.Fatal(err)
		}
		h := &v3.IPAMHandle{
			TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMHandle, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: ipam.HandleName(bl.handle)},
			Spec:       v3.IPAMHandleSpec{HandleID: bl.handle, Block: map[string]int{bl.cidr: 1}},
		}
		for _, r := range []v3.Resource{blk, h} {
			if _, err := w.c.Create(w.ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("", 0, "ipam check -o "+report)
	js, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	tr.WriteString(normaliseReport(string(js)))

	// Clean up for the scenarios after this one.
	for _, k := range []datastore.Key{
		{Kind: v3.KindIPAMBlock, Name: "10-60-0-0-24"}, {Kind: v3.KindIPAMBlock, Name: "10-60-0-0-28"},
		{Kind: v3.KindIPAMHandle, Name: "ov-handle-a"}, {Kind: v3.KindIPAMHandle, Name: "ov-handle-b"},
		{Kind: v3.KindIPPool, Name: "ov-big"},
	} {
		if _, err := w.c.Delete(w.ctx, k, datastore.DeleteOptions{}); err != nil {
			t.Errorf("cleaning up %s: %v", k, err)
		}
	}
	checkGolden(t, "overlap", tr.String())
}

// normaliseReport keeps the parts of an ipam check report that do not
// depend on the rest of the store (other scenarios' leftovers).
func normaliseReport(js string) string {
	var out []string
	keep := false
	for _, line := range strings.Split(js, "\n") {
		if strings.Contains(line, `"overlappingBlocks"`) {
			keep = true
		}
		if keep {
			out = append(out, line)
		}
		if keep && strings.HasPrefix(strings.TrimSpace(line), "]") {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}
