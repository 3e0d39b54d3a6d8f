package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/tabbynet/tabby/lib/calicolog"
)

// TestCallsLogged: each call and its outcome go to log_file_path (and
// stderr) at the configured level, in Calico's log line format; the last
// line of an ADD names the container, the interface and the addresses.
func TestCallsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni", "cni.log")
	var stderr strings.Builder
	p := &Plugin{LogStderr: &stderr}
	conf := []byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","log_level":"info","log_file_path":"` + path + `"}`)
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "eth0", Netns: "/var/run/netns/x", StdinData: conf}
	if err := p.logged("ADD", func(*skel.CmdArgs) ([]any, error) { return []any{"addresses", "10.0.0.5/32,fd00::5/128"}, nil })(args); err != nil {
		t.Fatal(err)
	}
	if err := p.logged("DEL", plain(func(*skel.CmdArgs) error { return errors.New("boom") }))(args); err == nil {
		t.Fatal("the command's error was lost")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	for _, l := range lines {
		if !calicolog.LinePattern().MatchString(l) {
			t.Errorf("not Calico's log line format: %q", l)
		}
	}
	for _, want := range []string{
		`\[INFO\]\[\d+\] cni-plugin/logging\.go \d+: calico CNI plugin called args="" command="ADD" containerID="c1" ifName="eth0" netns="/var/run/netns/x"$`,
		`\[INFO\]\[\d+\] cni-plugin/logging\.go \d+: calico CNI plugin done addresses="10\.0\.0\.5/32,fd00::5/128" command="ADD" containerID="c1" duration=\S+ ifName="eth0"$`,
		`\[ERROR\]\[\d+\] cni-plugin/logging\.go \d+: calico CNI plugin failed command="DEL" containerID="c1" duration=\S+ error=boom ifName="eth0"$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(log) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "[DEBUG]") || stderr.String() != log {
		t.Errorf("debug at info, or stderr differs from the file:\n%s\n--\n%s", log, stderr.String())
	}
}

// TestRefusedNetconfLogged: Calico plugin settings Tabby's plugin does not
// implement are logged at ERROR with the reason; zero values are not.
func TestRefusedNetconfLogged(t *testing.T) {
	var stderr strings.Builder
	p := &Plugin{LogStderr: &stderr}
	conf := []byte(`{"name":"n","type":"calico","qps":50,"burst":0,"device_type":"veth","policy":{"type":"k8s","k8s_auth_token":"x"},"windows_use_single_network":false}`)
	_ = p.logged("ADD", plain(func(*skel.CmdArgs) error { return nil }))(&skel.CmdArgs{StdinData: conf})
	for _, want := range []string{`: CNI setting refused command="ADD" containerID="" ifName="" reason="the plugin's Kubernetes client uses client-go's rate limits" setting="qps"`, `setting="policy.k8s_auth_token"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	for _, not := range []string{`setting="burst"`, `setting="device_type"`, `setting="windows_use_single_network"`} {
		if strings.Contains(stderr.String(), not) {
			t.Errorf("zero value refused: %s", not)
		}
	}
}
