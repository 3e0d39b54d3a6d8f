package commands

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func fakeProbe(missing ...string) systemProbe {
	gone := map[string]bool{}
	for _, m := range missing {
		gone[m] = true
	}
	return systemProbe{
		output: func(name string, _ ...string) (string, error) {
			if gone[name] {
				return "", errors.New("not found")
			}
			if name == "iptables" {
				return "iptables v1.8.9 (nf_tables)", nil
			}
			return name + " 1.0", nil
		},
		moduleLoaded: func(m string) bool { return !gone[m] },
		kernel:       func() string { return "6.1.0" },
	}
}

func TestCheckSystem(t *testing.T) {
	var out bytes.Buffer
	if err := printChecks(&out, checkSystem(fakeProbe("vxlan"))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"backend nft", "module vxlan          WARN", "System meets the requirements"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	err := printChecks(&out, checkSystem(fakeProbe("ipset", "bird")))
	if err == nil || !strings.Contains(err.Error(), "1 required component(s) missing") {
		t.Fatalf("error %v (bird is optional, ipset is not)", err)
	}
	if !strings.Contains(out.String(), "install ipset") {
		t.Errorf("no fix given:\n%s", out.String())
	}
}

// TestCheckSystemOnThisHost runs the real probe: CI installs iptables,
// ipset and bird2, so the check must pass here.
func TestCheckSystemOnThisHost(t *testing.T) {
	var out bytes.Buffer
	if err := printChecks(&out, checkSystem(realProbe())); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
