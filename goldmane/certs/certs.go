// Package certs makes the TLS material of the aggregator and its nodes:
// a CA, the aggregator's server certificate and the nodes' client
// certificate, in the files Calico's components read (tls.crt, tls.key,
// ca.crt). The lab and the tests use it, and `goldmane certs` writes it
// for a cluster's Secrets.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Paths of one written set (see Write).
type Paths struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// Write makes a CA valid for validity, a server certificate for the
// names (DNS names or IPs) and a client certificate with common name
// client, into dir: ca.crt, server/tls.{crt,key}, client/tls.{crt,key}.
func Write(dir string, names []string, client string, validity time.Duration) (Paths, error) {
	p := Paths{CA: filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server", "tls.crt"), ServerKey: filepath.Join(dir, "server", "tls.key"),
		ClientCert: filepath.Join(dir, "client", "tls.crt"), ClientKey: filepath.Join(dir, "client", "tls.key")}
	now := time.Now().Add(-time.Minute)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "tabby-goldmane-ca"},
		NotBefore: now, NotAfter: now.Add(validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writePEM(p.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return p, err
	}
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "goldmane"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, n)
		}
	}
	if err := leaf(server, ca, caKey, now, validity, p.ServerCert, p.ServerKey); err != nil {
		return p, err
	}
	cl := &x509.Certificate{Subject: pkix.Name{CommonName: client}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return p, leaf(cl, ca, caKey, now, validity, p.ClientCert, p.ClientKey)
}

func leaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time, validity time.Duration, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial(), now, now.Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing %s: %w", tmpl.Subject.CommonName, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", kder, 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
