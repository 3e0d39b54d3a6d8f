package kdd

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// serveResumption starts a TLS server (HTTP/2) that answers whether the
// request's connection resumed a session, and returns a config trusting
// its certificate.
func serveResumption(t *testing.T) *rest.Config {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.TLS.DidResume)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca, ServerName: "example.com"}}
}

// resumed makes one request as a fresh process would (a new transport
// with the session file) and says whether its connection resumed.
func resumed(t *testing.T, rc *rest.Config, path string) bool {
	t.Helper()
	one, err := OneConnection(rc, path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(one)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(rc.Host + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// TLS 1.3 tickets come after the handshake: a second request on the
	// connection makes sure the client has read (and stored) it.
	resp, err = client.Get(rc.Host + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return string(b) == "true"
}

// TestTLSSessionFile: the next process resumes the session the last one
// kept, and nothing but a private file for the same server and trust is
// used.
func TestTLSSessionFile(t *testing.T) {
	rc := serveResumption(t)
	path := filepath.Join(t.TempDir(), "session")
	if resumed(t, rc, path) {
		t.Fatal("the first connection resumed")
	}
	file := newSessionFile(path, rc).path
	if m := mode(t, file); m != 0o600 {
		t.Fatalf("session file mode %o, want 600", m)
	}
	if !resumed(t, rc, path) {
		t.Fatal("the second process did not resume the kept session")
	}
	if resumed(t, rc, "") {
		t.Error("resumed without a session file")
	}

	// Readable or writable by others: not used.
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	if resumed(t, rc, path) {
		t.Error("resumed from a group-readable session file")
	}
	// A link: not followed.
	link := filepath.Join(t.TempDir(), "link")
	resumed(t, rc, path) // a private file again
	if err := os.Symlink(file, newSessionFile(link, rc).path); err != nil {
		t.Fatal(err)
	}
	if resumed(t, rc, link) {
		t.Error("resumed through a symbolic link")
	}
	// Another trust (a different CA bundle): not used, even from the
	// same file.
	other := *rc
	other.TLSClientConfig.CAData = append(append([]byte(nil), rc.TLSClientConfig.CAData...), rc.TLSClientConfig.CAData...)
	resumed(t, rc, path) // keep a fresh session for rc
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newSessionFile(path, &other).path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if resumed(t, &other, path) {
		t.Error("resumed a session kept under another CA bundle")
	}
	// Damaged: a full handshake, then a good session again.
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if resumed(t, rc, path) {
		t.Error("resumed from a damaged file")
	}
	if !resumed(t, rc, path) {
		t.Error("no session kept after a damaged file")
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
