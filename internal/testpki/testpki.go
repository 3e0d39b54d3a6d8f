// Package testpki makes throwaway certificate authorities and
// certificates for tests of TLS to real servers (etcd with client
// certificate authentication): ECDSA P-256, written as PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs server and client
// certificates.
type CA struct {
	t      testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string // PEM of the CA certificate
}

// Pair is a certificate and its key as PEM files (and their contents).
type Pair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   string
	NotAfter          time.Time
}

var serial = big.NewInt(time.Now().UnixNano())

func nextSerial() *big.Int { return serial.Add(serial, big.NewInt(1)) }

// NewCA makes a CA named name, its files under dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: dir, cert: cert, key: key, CAFile: filepath.Join(dir, name+"-ca.pem")}
	writeFile(t, ca.CAFile, pemBlock("CERTIFICATE", der))
	return ca
}

// PEM is the CA certificate as PEM.
func (ca *CA) PEM() string {
	b, err := os.ReadFile(ca.CAFile)
	if err != nil {
		ca.t.Fatal(err)
	}
	return string(b)
}

// Options shape a certificate.
type Options struct {
	IPs       []net.IP
	DNSNames  []string
	Client    bool          // client auth usage (else server)
	NotBefore time.Time     // default an hour ago
	ValidFor  time.Duration // default 24h; negative makes it expired
}

// Issue signs a certificate for commonName and writes it as
// <name>.pem/<name>-key.pem.
func (ca *CA) Issue(name, commonName string, o Options) Pair {
	t := ca.t
	t.Helper()
	key := newKey(t)
	nb := o.NotBefore
	if nb.IsZero() {
		nb = time.Now().Add(-time.Hour)
	}
	validFor := o.ValidFor
	if validFor == 0 {
		validFor = 24 * time.Hour
	}
	// Server certificates carry client use too, as kubeadm's etcd
	// certificates do: etcd's JSON gateway connects to its own gRPC
	// service with the server certificate.
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if o.Client {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    nb,
		NotAfter:     nb.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  o.IPs,
		DNSNames:     o.DNSNames,
	}
	if validFor < 0 {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{
		CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"),
		CertPEM: string(pemBlock("CERTIFICATE", der)), KeyPEM: string(pemBlock("EC PRIVATE KEY", keyDER)),
		NotAfter: tmpl.NotAfter,
	}
	writeFile(t, p.CertFile, []byte(p.CertPEM))
	writeFile(t, p.KeyFile, []byte(p.KeyPEM))
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeFile writes atomically (a rename), as a certificate rotation would.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
