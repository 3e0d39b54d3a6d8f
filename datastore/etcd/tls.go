package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSFiles is the TLS material for etcd as Calico configures it: PEM
// files (etcdCACertFile, etcdCertFile, etcdKeyFile) or the same PEM
// inline (etcdCACert, etcdCert, etcdKey). A file and its inline form are
// mutually exclusive; a certificate needs its key.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
	CA, Cert, Key             string // inline PEM
}

// Empty reports whether no TLS material is configured.
func (f TLSFiles) Empty() bool { return f == TLSFiles{} }

// validate checks the combination, naming Calico's settings.
func (f TLSFiles) validate() error {
	switch {
	case f.CAFile != "" && f.CA != "":
		return errors.New("etcdCACertFile and etcdCACert are both set: use one")
	case f.CertFile != "" && f.Cert != "":
		return errors.New("etcdCertFile and etcdCert are both set: use one")
	case f.KeyFile != "" && f.Key != "":
		return errors.New("etcdKeyFile and etcdKey are both set: use one")
	case (f.CertFile != "" || f.Cert != "") != (f.KeyFile != "" || f.Key != ""):
		return errors.New("a client certificate needs its key: set both etcdCertFile and etcdKeyFile (or etcdCert and etcdKey)")
	}
	return nil
}

// NewTLSConfig builds a client TLS configuration from f (nil when f is
// empty). The client certificate and key are re-read when their files
// change, so a rotated certificate is presented from the next connection
// on, without a restart. The CA pool is read now: a long-running
// Transport that must follow a rotated CA rebuilds its connection when
// CAStamp changes. It fails at once when a file is missing or holds no
// usable PEM.
func NewTLSConfig(f TLSFiles) (*tls.Config, error) {
	if f.Empty() {
		return nil, nil
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	m := &tlsMaterial{files: f}
	roots, err := m.roots()
	if err != nil {
		return nil, err
	}
	if _, err := m.clientCert(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots, // nil: the system's
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := m.clientCert()
			if c == nil && err == nil {
				c = &tls.Certificate{} // none configured: send none
			}
			return c, err
		},
	}, nil
}

// CAStamp identifies the current content of the CA file (size and
// modification time; "" without a CA file), for Transports that rebuild
// their connection when the CA rotates.
func (f TLSFiles) CAStamp() string {
	if f.CAFile == "" {
		return ""
	}
	st, err := stampOf(f.CAFile)
	if err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("%d/%d", st.size, st.mod.UnixNano())
}

// tlsMaterial caches the parsed client certificate, re-reading its files
// when their size or modification time changes.
type tlsMaterial struct {
	files TLSFiles

	mu     sync.Mutex
	certAt [2]fileStamp
	cert   *tls.Certificate
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: st.Size(), mod: st.ModTime()}, nil
}

// roots reads the CA pool (nil: the system's).
func (m *tlsMaterial) roots() (*x509.CertPool, error) {
	f := m.files
	pem := []byte(f.CA)
	switch {
	case f.CAFile != "":
		var err error
		if pem, err = os.ReadFile(f.CAFile); err != nil {
			return nil, fmt.Errorf("etcd CA certificate (etcdCACertFile): %w", err)
		}
	case f.CA == "":
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("etcd CA certificate (%s): no PEM certificate in it", nameOr(f.CAFile, "etcdCACert"))
	}
	return pool, nil
}

// clientCert returns the client certificate, or nil when none is
// configured.
func (m *tlsMaterial) clientCert() (*tls.Certificate, error) {
	f := m.files
	if f.CertFile == "" && f.Cert == "" {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	certPEM, keyPEM := []byte(f.Cert), []byte(f.Key)
	var stamps [2]fileStamp
	var err error
	if f.CertFile != "" {
		if stamps[0], err = stampOf(f.CertFile); err != nil {
			return nil, fmt.Errorf("etcd client certificate (etcdCertFile): %w", err)
		}
	}
	if f.KeyFile != "" {
		if stamps[1], err = stampOf(f.KeyFile); err != nil {
			return nil, fmt.Errorf("etcd client key (etcdKeyFile): %w", err)
		}
	}
	if m.cert != nil && stamps == m.certAt {
		return m.cert, nil
	}
	if f.CertFile != "" {
		if certPEM, err = os.ReadFile(f.CertFile); err != nil {
			return nil, fmt.Errorf("etcd client certificate (etcdCertFile): %w", err)
		}
	}
	if f.KeyFile != "" {
		if keyPEM, err = os.ReadFile(f.KeyFile); err != nil {
			return nil, fmt.Errorf("etcd client key (etcdKeyFile): %w", err)
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if m.cert != nil {
			// A rotation caught halfway (certificate written, key not
			// yet): keep the pair that worked until both match.
			return m.cert, nil
		}
		return nil, fmt.Errorf("etcd client certificate and key (%s, %s): %w",
			nameOr(f.CertFile, "etcdCert"), nameOr(f.KeyFile, "etcdKey"), err)
	}
	m.cert, m.certAt = &c, stamps
	return m.cert, nil
}

func nameOr(path, setting string) string {
	if path != "" {
		return path
	}
	return setting
}
