package kdd

import (
	"context"
	"net"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
)

// relayDialTimeout bounds the check that the relay answers.
const relayDialTimeout = 100 * time.Millisecond

// ViaRelay returns rc changed to send its requests through calico-node's
// relay at socket (node/kuberelay: the reads that may be a little behind
// come from calico-node's watches, the rest goes on to the API server
// over calico-node's connection), and true; or rc unchanged and false
// when there is no relay listening there, or rc does not authenticate
// with a bearer token, the one credential a relay can pass on.
func ViaRelay(rc *rest.Config, socket string) (*rest.Config, bool) {
	if socket == "" || rc.BearerToken == "" && rc.BearerTokenFile == "" || rc.Transport != nil ||
		rc.ExecProvider != nil || rc.AuthProvider != nil || rc.Impersonate.UserName != "" || rc.Proxy != nil {
		return rc, false
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		return rc, false
	}
	conn, err := net.DialTimeout("unix", socket, relayDialTimeout)
	if err != nil {
		return rc, false
	}
	conn.Close()
	out := rest.CopyConfig(rc)
	out.Host = "http://kube-relay" + u.Path
	out.TLSClientConfig = rest.TLSClientConfig{}
	dialer := &net.Dialer{Timeout: relayDialTimeout}
	out.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, "unix", socket)
	}
	return out, true
}
