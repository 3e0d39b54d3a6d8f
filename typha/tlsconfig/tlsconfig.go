// Package tlsconfig makes the mutual TLS configurations between Typha and
// its clients as Calico's: each side presents a certificate signed by the
// shared CA, and each checks the other's common name or URI SAN (Typha:
// TYPHA_CLIENTCN / TYPHA_CLIENTURISAN; felix: TyphaCN / TyphaURISAN),
// not its host name, since Typha is reached by pod address.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names a side's certificate, key and the CA it trusts, and what it
// requires of the peer's certificate (either or both of CN and URISAN; at
// least one).
type Files struct {
	CertFile, KeyFile, CAFile string
	CN, URISAN                string
}

// Set reports whether any TLS setting is given (Calico: TLS is required
// when any is).
func (f Files) Set() bool {
	return f.CertFile+f.KeyFile+f.CAFile+f.CN+f.URISAN != ""
}

// Existing returns f without the files that do not exist, and the
// settings dropped: Calico's felix reads its Typha certificate settings as
// files that must exist and ignores one naming a missing file (the
// manifests mount the node's certificate from an optional Secret). A
// name to check (CN, URISAN) still requires TLS, which then fails for the
// missing file.
func (f Files) Existing() (Files, []string) {
	var dropped []string
	for _, p := range []struct {
		name string
		path *string
	}{{"CertFile", &f.CertFile}, {"KeyFile", &f.KeyFile}, {"CAFile", &f.CAFile}} {
		if *p.path == "" {
			continue
		}
		if _, err := os.Stat(*p.path); errors.Is(err, os.ErrNotExist) {
			dropped = append(dropped, p.name+"="+*p.path)
			*p.path = ""
		}
	}
	return f, dropped
}

func (f Files) load() (tls.Certificate, *x509.CertPool, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return tls.Certificate{}, nil, errors.New("TLS needs a certificate, a key and a CA file")
	}
	if f.CN == "" && f.URISAN == "" {
		return tls.Certificate{}, nil, errors.New("TLS needs the peer's common name or URI SAN to check")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("loading %s and %s: %w", f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tls.Certificate{}, nil, fmt.Errorf("%s holds no PEM certificate", f.CAFile)
	}
	return cert, pool, nil
}

// Server returns Typha's listener configuration.
func Server(f Files) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		VerifyPeerCertificate: checkName(f.CN, f.URISAN, pool, x509.ExtKeyUsageClientAuth)}, nil
}

// Client returns a Typha client's configuration.
func Client(f Files) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	// The chain is verified in VerifyPeerCertificate, against the CA and
	// the required name, instead of the dialled host name.
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		InsecureSkipVerify:    true, //nolint:gosec // verified below
		VerifyPeerCertificate: checkName(f.CN, f.URISAN, pool, x509.ExtKeyUsageServerAuth)}, nil
}

func checkName(cn, uriSAN string, pool *x509.CertPool, usage x509.ExtKeyUsage) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("no peer certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		leaf := certs[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("peer certificate: %w", err)
		}
		if cn != "" && leaf.Subject.CommonName == cn {
			return nil
		}
		if uriSAN != "" {
			for _, u := range leaf.URIs {
				if u.String() == uriSAN {
					return nil
				}
			}
		}
		return fmt.Errorf("peer certificate has common name %q and no URI SAN %q (want common name %q)", leaf.Subject.CommonName, uriSAN, cn)
	}
}
