package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

// TestCallsLogged: each call and its outcome go to log_file_path (and
// stderr) at the configured level.
func TestCallsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni", "cni.log")
	var stderr strings.Builder
	p := &Plugin{LogStderr: &stderr}
	conf := []byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","log_level":"info","log_file_path":"` + path + `"}`)
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "eth0", Netns: "/var/run/netns/x", StdinData: conf}
	if err := p.logged("ADD", func(*skel.CmdArgs) error { return nil })(args); err != nil {
		t.Fatal(err)
	}
	if err := p.logged("DEL", func(*skel.CmdArgs) error { return errors.New("boom") })(args); err == nil {
		t.Fatal("the command's error was lost")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{
		`level=INFO msg="calico CNI plugin called" command=ADD containerID=c1 ifName=eth0`,
		`level=INFO msg="calico CNI plugin done" command=ADD`,
		`level=ERROR msg="calico CNI plugin failed" command=DEL containerID=c1 ifName=eth0 error=boom`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "level=DEBUG") || stderr.String() != log {
		t.Errorf("debug at info, or stderr differs from the file:\n%s\n--\n%s", log, stderr.String())
	}
}

// TestRefusedNetconfLogged: Calico plugin settings Tabby's plugin does not
// implement are logged at ERROR with the reason; zero values are not.
func TestRefusedNetconfLogged(t *testing.T) {
	var stderr strings.Builder
	p := &Plugin{LogStderr: &stderr}
	conf := []byte(`{"name":"n","type":"calico","qps":50,"burst":0,"device_type":"veth","policy":{"type":"k8s","k8s_auth_token":"x"},"windows_use_single_network":false}`)
	_ = p.logged("ADD", func(*skel.CmdArgs) error { return nil })(&skel.CmdArgs{StdinData: conf})
	for _, want := range []string{`msg="CNI setting refused" command=ADD containerID="" ifName="" setting=qps`, "setting=policy.k8s_auth_token"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	for _, not := range []string{"setting=burst", "setting=device_type", "setting=windows_use_single_network"} {
		if strings.Contains(stderr.String(), not) {
			t.Errorf("zero value refused: %s", not)
		}
	}
}
