package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// gRPC codes etcd uses for refused credentials and permissions.
const (
	codeInvalidArgument  = 3  // "authentication failed, invalid user ID or password", "user name is empty"
	codePermissionDenied = 7  // "permission denied"
	codeUnauthenticated  = 16 // "invalid auth token"
)

// tlsError is a TLS handshake with an endpoint that failed.
type tlsError struct {
	endpoint string
	err      error
}

func (e *tlsError) Error() string { return "TLS handshake with " + e.endpoint + ": " + e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// accessProblem says, in words an operator can act on, why etcd and this
// client refused each other, or ok=false when err is not such a refusal
// (the store is down, a request conflicted, ...). It reads both the
// hand-written transport's errors (typed) and the client library's (gRPC
// statuses whose message carries the TLS failure).
func accessProblem(err error) (reason string, ok bool) {
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknownCA):
		return "etcd's server certificate is not signed by a CA this client trusts: check etcdCACertFile (ETCD_CA_CERT_FILE)", true
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "etcd's server certificate has expired or is not yet valid", true
	case errors.As(err, &host):
		return "etcd's server certificate does not name the endpoint's host: use an endpoint name the certificate lists", true
	}
	msg := err.Error()
	var se *kvpb.ServerError
	if errors.As(err, &se) {
		switch se.Code {
		case codeUnauthenticated:
			return "etcd refused the authentication token: check etcdUsername/etcdPassword (ETCD_USERNAME/ETCD_PASSWORD)", true
		case codePermissionDenied:
			return "the etcd user has no permission on Calico's keys: grant it a role with readwrite on the /calico/ prefix", true
		case codeInvalidArgument:
			switch {
			case strings.Contains(msg, "authentication failed"):
				return "etcd refused the username or password: check etcdUsername/etcdPassword (ETCD_USERNAME/ETCD_PASSWORD)", true
			case strings.Contains(msg, "user name is empty"):
				return "etcd has authentication enabled: set etcdUsername/etcdPassword (ETCD_USERNAME/ETCD_PASSWORD) or a client certificate with a user name", true
			}
		}
	}
	switch {
	case strings.Contains(msg, "x509: certificate signed by unknown authority"):
		return "etcd's server certificate is not signed by a CA this client trusts: check etcdCACertFile (ETCD_CA_CERT_FILE)", true
	case strings.Contains(msg, "x509: certificate has expired or is not yet valid"):
		return "etcd's server certificate has expired or is not yet valid", true
	case strings.Contains(msg, "x509: certificate is valid for"):
		return "etcd's server certificate does not name the endpoint's host: use an endpoint name the certificate lists", true
	case strings.Contains(msg, "remote error: tls: certificate required"):
		return "etcd requires a client certificate: set etcdCertFile and etcdKeyFile (ETCD_CERT_FILE, ETCD_KEY_FILE)", true
	case strings.Contains(msg, "remote error: tls: expired certificate"), strings.Contains(msg, "remote error: tls: certificate expired"):
		return "etcd refused the client certificate: it has expired (renew etcdCertFile)", true
	case strings.Contains(msg, "remote error: tls: bad certificate"), strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: unknown certificate"):
		return "etcd refused the client certificate: it is not signed by a CA etcd trusts (--trusted-ca-file), or is not valid for client use", true
	case strings.Contains(msg, "tls: first record does not look like a TLS handshake"), strings.Contains(msg, "http: server gave HTTP response to HTTPS client"):
		return "the endpoint does not speak TLS: use http:// for it, or enable TLS on etcd", true
	}
	return "", false
}

// diagnoseTLS looks for the reason a TLS endpoint cannot be used, after a
// request failed in a way that hides it (a gRPC client retrying its
// connection reports only a deadline; an HTTP/2 client only that the
// connection "could not be established"). It connects to each https
// endpoint with cfg, completes the handshake and sends the HTTP/2
// preface, so a server that rejects the client certificate after a TLS
// 1.3 handshake says so with its alert. It returns the first handshake or
// alert error, or nil when every endpoint accepted the client (the
// failure was something else) or none could be reached.
func diagnoseTLS(ctx context.Context, endpoints []string, cfg *tls.Config, timeout time.Duration) error {
	for _, ep := range endpoints {
		base, network, addr, secure, err := endpointAddr(ep)
		if err != nil || !secure {
			continue
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			c.ServerName = serverName(base)
		}
		if err := probeTLS(ctx, network, addr, c, timeout); err != nil {
			return &tlsError{endpoint: ep, err: err}
		}
	}
	return nil
}

func probeTLS(ctx context.Context, network, addr string, cfg *tls.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil // unreachable: not an access problem
	}
	defer raw.Close()
	c := cfg.Clone()
	c.NextProtos = []string{"h2"}
	conn := tls.Client(raw, c)
	if err := conn.HandshakeContext(ctx); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// The HTTP/2 client preface and an empty SETTINGS frame: the server
	// answers with its SETTINGS, or with the alert that rejects us.
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		return remoteAlert(err)
	}
	buf := make([]byte, 9)
	_, err = io.ReadFull(conn, buf)
	return remoteAlert(err)
}

// remoteAlert keeps err only when it is the server's TLS alert.
func remoteAlert(err error) error {
	if err != nil && strings.Contains(err.Error(), "remote error: tls:") {
		return err
	}
	return nil
}
