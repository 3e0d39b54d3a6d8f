package kdd

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/rest"
)

// A one-call process (the CNI plugin, one per pod) opens one TLS
// connection to the API server and exits. A full TLS handshake costs the
// server a signature with its key (RSA-2048 for kubeadm's certificates)
// and the client a chain check: measured on a busy 2-core machine, 2.6 ms
// of CPU per handshake against 1.05 ms resumed. sessionFile keeps the
// server's TLS 1.3 session ticket between processes so the next one
// resumes (a PSK handshake, with a fresh key exchange: still forward
// secret); the server falls back to a full handshake whenever it no
// longer accepts the ticket (restarted, keys rotated, expired).
//
// The file lets whoever can write it choose the session a client
// resumes, which skips the server's certificate: it is only read when it
// is a regular file owned by this process's user and neither group- nor
// world-accessible (the plugin runs as root: root-only), and only for the
// same server and the same trust (its key covers the API server's
// address, the server name, the CA bundle and the client certificate).
// Anything else, unreadable or damaged, means a full handshake.

// sessionFile is a tls.ClientSessionCache holding one session in a file.
type sessionFile struct {
	path string
	key  string // which server and trust the session is for
}

var _ tls.ClientSessionCache = (*sessionFile)(nil)

// newSessionFile returns the session cache for rc's server, kept in a
// file named path plus a digest of its key (clients of different servers
// or trusts on one node do not replace each other's session), or nil
// when rc's trust cannot be named (a CA or certificate file that cannot
// be read: the handshake will report that).
func newSessionFile(path string, rc *rest.Config) *sessionFile {
	key, err := sessionKey(rc)
	if err != nil {
		return nil
	}
	return &sessionFile{path: path + "-" + key[:16], key: key}
}

// sessionKey names the server and the trust a session is valid for.
func sessionKey(rc *rest.Config) (string, error) {
	h := sha256.New()
	part := func(b []byte) { fmt.Fprintf(h, "%d:", len(b)); h.Write(b) }
	file := func(data []byte, path string) error {
		if len(data) > 0 || path == "" {
			part(data)
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		part(b)
		return nil
	}
	t := rc.TLSClientConfig
	part([]byte(rc.Host))
	part([]byte(t.ServerName))
	part([]byte(fmt.Sprint(t.Insecure)))
	if err := file(t.CAData, t.CAFile); err != nil {
		return "", err
	}
	if err := file(t.CertData, t.CertFile); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// storedSession is the file's content.
type storedSession struct {
	Key       string `json:"key"`       // sessionFile.key + the TLS stack's own key
	Ticket    []byte `json:"ticket"`    // as the server sent it
	Resumable []byte `json:"resumable"` // tls.SessionState.Bytes
}

// Get implements tls.ClientSessionCache.
func (s *sessionFile) Get(tlsKey string) (*tls.ClientSessionState, bool) {
	data, err := readPrivate(s.path)
	if err != nil {
		return nil, false
	}
	var st storedSession
	if json.Unmarshal(data, &st) != nil || st.Key != s.key+"|"+tlsKey {
		return nil, false
	}
	state, err := tls.ParseSessionState(st.Resumable)
	if err != nil {
		return nil, false
	}
	cs, err := tls.NewResumptionState(st.Ticket, state)
	if err != nil {
		return nil, false
	}
	return cs, true
}

// Put implements tls.ClientSessionCache: the newest session replaces the
// file (written aside and renamed, mode 0600); nil removes it.
func (s *sessionFile) Put(tlsKey string, cs *tls.ClientSessionState) {
	if cs == nil {
		os.Remove(s.path)
		return
	}
	ticket, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return
	}
	resumable, err := state.Bytes()
	if err != nil {
		return
	}
	data, err := json.Marshal(storedSession{Key: s.key + "|" + tlsKey, Ticket: ticket, Resumable: resumable})
	if err != nil {
		return
	}
	writePrivate(s.path, data) // best effort: the next process does a full handshake
}

// readPrivate reads path if it is a regular file (not a link) owned by
// this process's user and neither group- nor world-accessible.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || int(st.Uid) != os.Geteuid() {
		return nil, errors.New("not a private file")
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// writePrivate replaces path with data, mode 0600, atomically.
func writePrivate(path string, data []byte) {
	dir := filepath.Dir(path)
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
