package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/goldmane/certs"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// The flow aggregator (up --flows): one goldmane process on the host, as
// the Deployment runs it in a cluster. The nodes' felix reach its gRPC
// API over a Unix socket in the lab's folder (like etcd's: reachable
// from every node's namespace) with mutual TLS (a CA, the aggregator's
// certificate for "localhost", the nodes' client certificate, written by
// goldmane/certs); the default FelixConfiguration names it in
// flowLogsGoldmaneServer, as Calico's operator does, and felix's client
// certificate is in calico-node's environment (FELIX_TYPHA*FILE, as the
// manifest). The page and health listen on the host's loopback.

// GoldmaneState is the lab's aggregator.
type GoldmaneState struct {
	// Socket is the gRPC Unix socket; Server the FlowLogsGoldmaneServer
	// naming it.
	Socket string `json:"socket"`
	Server string `json:"server"`
	// Page is the flow page's URL.
	Page string `json:"page"`
	// CA, ClientCert and ClientKey: the nodes' TLS material (also a
	// client's of the Flows API, e.g. tests).
	CA         string `json:"ca"`
	ClientCert string `json:"clientCert"`
	ClientKey  string `json:"clientKey"`
}

// labFlowFlush is the lab's FlowLogsFlushInterval with the aggregator
// (Calico's operator sets 15 s with Goldmane; felix's default is 300 s).
const labFlowFlush = 15 * time.Second

// startGoldmane starts the aggregator and writes its TLS material.
func (l *Lab) startGoldmane() error {
	dir := filepath.Join(l.Dir, "goldmane")
	p, err := certs.Write(filepath.Join(dir, "certs"), []string{"localhost"}, "calico-node", 365*24*time.Hour)
	if err != nil {
		return fmt.Errorf("writing the aggregator's certificates: %w", err)
	}
	page, err := harness.FreePort()
	if err != nil {
		return err
	}
	health, err := harness.FreePort()
	if err != nil {
		return err
	}
	bin := filepath.Join(l.Bin, "goldmane")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("goldmane is missing from %s: run make build (or up --flows=false): %w", l.Bin, err)
	}
	sock := filepath.Join(dir, "goldmane.sock")
	env := []string{"TABBY_LISTEN_SOCKET=" + sock, "TABBY_LISTEN_HOST=127.0.0.1",
		"SERVER_CERT_PATH=" + p.ServerCert, "SERVER_KEY_PATH=" + p.ServerKey, "CA_CERT_PATH=" + p.CA,
		"TABBY_PAGE_PORT=" + strconv.Itoa(page), "HEALTH_PORT=" + strconv.Itoa(health)}
	proc, err := l.spawn("goldmane", "", env, bin)
	if err != nil {
		return err
	}
	if err := l.waitHealthy("goldmane", proc, "http://127.0.0.1:"+strconv.Itoa(health)+"/readiness", nil, 30*time.Second); err != nil {
		return err
	}
	l.State.Goldmane = &GoldmaneState{Socket: sock, Server: "unix://" + sock, Page: "http://127.0.0.1:" + strconv.Itoa(page) + "/",
		CA: p.CA, ClientCert: p.ClientCert, ClientKey: p.ClientKey}
	return l.save()
}

// pointFelixAtGoldmane writes flowLogsGoldmaneServer (and the flush
// interval) into the default FelixConfiguration before the nodes start.
func (l *Lab) pointFelixAtGoldmane(ctx context.Context, flush time.Duration) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	set := func(fc *v3.FelixConfiguration) {
		server := l.State.Goldmane.Server
		fc.Spec.FlowLogsGoldmaneServer = &server
		fc.Spec.FlowLogsFlushInterval = &metav1.Duration{Duration: flush}
	}
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	if errors.Is(err, datastore.ErrNotFound) {
		fc := &v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		set(fc)
		_, err = c.Create(ctx, fc)
	} else if err == nil {
		fc := r.(*v3.FelixConfiguration)
		set(fc)
		_, err = c.Update(ctx, fc)
	}
	if err != nil {
		return fmt.Errorf("pointing felix at the aggregator (FelixConfiguration default): %w", err)
	}
	return nil
}

// goldmaneEnv is felix's client certificate for the aggregator.
func (l *Lab) goldmaneEnv() []string {
	g := l.State.Goldmane
	if g == nil {
		return nil
	}
	return []string{"FELIX_TYPHACERTFILE=" + g.ClientCert, "FELIX_TYPHAKEYFILE=" + g.ClientKey, "FELIX_TYPHACAFILE=" + g.CA}
}
