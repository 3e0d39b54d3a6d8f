//go:build integration

package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestGetListsPastUndecodableRecords: with one IPPool record that cannot
// be decoded (written with etcdctl at Calico's key), `get ippools` lists
// the others exactly as before and names the bad one on stderr (exit 0,
// as Calico, which leaves such records out); getting it by name fails
// saying it is damaged; `delete` removes it.
func TestGetListsPastUndecodableRecords(t *testing.T) {
	b := etcdBackend(t)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{b.env["ETCD_ENDPOINTS"]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if out, code := b.run(t, "", args("create -f testdata/cli/pools.yaml")...); code != 0 {
		t.Fatal(out)
	}
	good, _ := b.run(t, "", args("get ippools")...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raw.Put(ctx, "/calico/resources/v3/projectcalico.org/ippools/broken", `{"kind":"IPPool","spec":{"cidr":`); err != nil {
		t.Fatal(err)
	}

	out, code := b.run(t, "", args("get ippools")...)
	t.Log(out)
	if code != 0 {
		t.Fatalf("get ippools with one bad record: exit %d\n%s", code, out)
	}
	if !strings.HasPrefix(out, good) {
		t.Errorf("good pools not listed as before:\n got %s\nwant (prefix) %s", out, good)
	}
	if !strings.Contains(out, `Warning: IPPool "broken" not listed`) || !strings.Contains(out, "/calico/resources/v3/projectcalico.org/ippools/broken") ||
		!strings.Contains(out, "calicoctl delete ippool broken") {
		t.Errorf("bad record not reported:\n%s", out)
	}
	if out, code := b.run(t, "", args("get ippool broken")...); code != 1 || !strings.Contains(out, "cannot be decoded") {
		t.Errorf("get of the bad record:\n%s", out)
	}
	if out, code := b.run(t, "", args("delete ippool broken")...); code != 0 {
		t.Errorf("delete of the bad record:\n%s", out)
	}
	if out, _ := b.run(t, "", args("get ippools")...); out != good {
		t.Errorf("after delete:\n got %s\nwant %s", out, good)
	}
}
