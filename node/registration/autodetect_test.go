package registration

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func testEnv() Env {
	p := netip.MustParsePrefix
	return Env{
		Interfaces: []Interface{
			{Name: "lo", Addrs: []netip.Prefix{p("127.0.0.1/8"), p("::1/128")}},
			{Name: "docker0", Addrs: []netip.Prefix{p("172.17.0.1/16")}},
			{Name: "cali1234", Addrs: []netip.Prefix{p("169.254.1.1/32")}},
			{Name: "eth0", Addrs: []netip.Prefix{p("fe80::1/64"), p("10.0.0.5/24"), p("fd00::5/64")}},
			{Name: "eth1", Addrs: []netip.Prefix{p("192.168.9.7/24")}},
			{Name: "vxlan.calico", Addrs: []netip.Prefix{p("10.244.0.1/32")}},
		},
		RouteSource: func(dst netip.Addr) (netip.Addr, error) {
			if netip.MustParsePrefix("192.168.0.0/16").Contains(dst) {
				return netip.MustParseAddr("192.168.9.7"), nil
			}
			return netip.MustParseAddr("10.0.0.5"), nil
		},
		KubernetesInternalIPs: []netip.Addr{netip.MustParseAddr("192.168.9.7")},
	}
}

func TestAutodetect(t *testing.T) {
	for _, tc := range []struct {
		method  string
		version int
		want    string
		err     error // errors.Is; nil with want "" means any error
	}{
		{"", 4, "10.0.0.5/24", nil},
		{"first-found", 4, "10.0.0.5/24", nil},
		{"first-found", 6, "fd00::5/64", nil},
		{"interface=eth1", 4, "192.168.9.7/24", nil},
		{"interface=nope.*,eth1", 4, "192.168.9.7/24", nil},
		{"skip-interface=eth0", 4, "192.168.9.7/24", nil},
		{"can-reach=192.168.100.1", 4, "192.168.9.7/24", nil},
		{"can-reach=8.8.8.8", 4, "10.0.0.5/24", nil},
		{"cidr=192.168.0.0/16", 4, "192.168.9.7/24", nil},
		{"cidr=172.99.0.0/16, 10.0.0.0/8", 4, "10.0.0.5/24", nil},
		{"kubernetes-internal-ip", 4, "192.168.9.7/24", nil},
		{"interface=wlan.*", 4, "", ErrNoAddress},
		{"cidr=172.99.0.0/16", 4, "", ErrNoAddress},
		{"skip-interface=eth.*", 4, "", ErrNoAddress},
		{"interface=eth1", 6, "", ErrNoAddress},
		{"interface=(", 4, "", nil},
		{"cidr=bogus", 4, "", nil},
		{"can-reach=example.com", 4, "", nil},
		{"bogus-method", 4, "", nil},
	} {
		t.Run(tc.method+"/v"+string(rune('0'+tc.version)), func(t *testing.T) {
			got, err := Autodetect(tc.method, tc.version, testEnv())
			if tc.want != "" {
				if err != nil || got.String() != tc.want {
					t.Fatalf("got %v, %v; want %s", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), tc.method) {
				t.Errorf("error %q does not name the method %q", err, tc.method)
			}
		})
	}
}
