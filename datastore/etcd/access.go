package etcd

import (
	"crypto/x509"
	"errors"
	"strings"

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
