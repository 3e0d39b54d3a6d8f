package harness

import (
	"net"
	"os"
	"strings"
)

// NetnsDir is where named network namespaces live (ip netns).
const NetnsDir = "/run/netns"

// NetnsWithPrefix lists the named network namespaces <prefix>-*.
func NetnsWithPrefix(prefix string) []string {
	ents, _ := os.ReadDir(NetnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// FreePort is a TCP port free on the root namespace's loopback now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
