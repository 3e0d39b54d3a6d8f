package testservers

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BinDir is where the server binaries are looked up.
func BinDir() string {
	if d := os.Getenv("TABBY_KUBE_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "tabby-kube", "bin")
}

// binary returns the path of a server binary or fails the test.
func binary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(BinDir(), name)
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s not found at %s: run hack/build-kube-binaries.sh (or set TABBY_KUBE_BIN)", name, p)
	}
	return p
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func itoa(i int) string { return strconv.Itoa(i) }
