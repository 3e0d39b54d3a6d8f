package daemon_test

import (
	"fmt"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
)

// otherClient stands for any non-Kubernetes datastore (etcd).
type otherClient struct{ datastore.Client }

// TestNewSyncerPicksByDatastore: a kdd client is followed through kdd's
// informer syncer, any other client through the generic watch syncer.
func TestNewSyncerPicksByDatastore(t *testing.T) {
	// kdd connects lazily: nothing is dialled here.
	kc, err := kdd.New(kdd.Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := newDaemon(fake.NewKernel())
	for _, tc := range []struct {
		client datastore.Client
		want   string
	}{
		{kc, "*kdd.Syncer"},
		{otherClient{}, "*datastore.WatchSyncer"},
	} {
		if got := fmt.Sprintf("%T", daemon.NewSyncer(tc.client, d)); got != tc.want {
			t.Errorf("NewSyncer(%T) = %s, want %s", tc.client, got, tc.want)
		}
	}
}
