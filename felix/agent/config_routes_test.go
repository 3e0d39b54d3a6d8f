package agent

import (
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestRoutesAndStatusConfig: FELIX_NATOUTGOINGADDRESS (validated, over
// FelixConfiguration natOutgoingAddress) and FELIX_ENDPOINTSTATUSPATHPREFIX
// (Calico's /var/run/calico by default, "none" turns the files off).
func TestRoutesAndStatusConfig(t *testing.T) {
	c, err := loadConfig(env(map[string]string{"NODENAME": "n"}))
	if err != nil || c.statusPrefix != "/var/run/calico" || c.natOutgoingAddr != "" || c.mtuFile != "/var/lib/calico/mtu" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = loadConfig(env(map[string]string{"NODENAME": "n", "FELIX_ENDPOINTSTATUSPATHPREFIX": "none", "FELIX_NATOUTGOINGADDRESS": "192.0.2.7", "TABBY_FELIX_MTU_FILE": "none"}))
	if err != nil || c.statusPrefix != "" || c.natOutgoingAddr != "192.0.2.7" || c.mtuFile != "" {
		t.Fatalf("set: %+v, %v", c, err)
	}
	if rc := rulesConfig(c, &v3.FelixConfigurationSpec{NATOutgoingAddress: "192.0.2.1"}, nil); rc.NATOutgoingAddress != "192.0.2.7" {
		t.Errorf("env should win over FelixConfiguration: %q", rc.NATOutgoingAddress)
	}
	c.natOutgoingAddr = ""
	if rc := rulesConfig(c, &v3.FelixConfigurationSpec{NATOutgoingAddress: "192.0.2.1"}, nil); rc.NATOutgoingAddress != "192.0.2.1" {
		t.Errorf("FelixConfiguration natOutgoingAddress not applied: %q", rc.NATOutgoingAddress)
	}
	if _, err := loadConfig(env(map[string]string{"NODENAME": "n", "FELIX_NATOUTGOINGADDRESS": "not-an-ip"})); err == nil {
		t.Error("a bad FELIX_NATOUTGOINGADDRESS was accepted")
	}
}
