package numorstring

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPortJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Port
		out     string
		wantErr string
	}{
		{in: `80`, want: SinglePort(80), out: `80`},
		{in: `"80"`, want: SinglePort(80), out: `80`},
		{in: `"8080:8090"`, want: Port{MinPort: 8080, MaxPort: 8090}, out: `"8080:8090"`},
		{in: `"http-alt"`, want: NamedPort("http-alt"), out: `"http-alt"`},
		{in: `0`, want: SinglePort(0), out: `0`},
		{in: `65536`, wantErr: "outside 0-65535"},
		{in: `-1`, wantErr: "outside 0-65535"},
		{in: `"9000:80"`, wantErr: "minimum above its maximum"},
		{in: `"1:99999"`, wantErr: "above 65535"},
		{in: `"1:x"`, wantErr: "not a port number"},
		{in: `""`, wantErr: "empty port"},
		{in: `true`, wantErr: "number or a string"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var p Port
			err := json.Unmarshal([]byte(tc.in), &p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.want {
				t.Fatalf("got %+v, want %+v", p, tc.want)
			}
			b, _ := json.Marshal(p)
			if string(b) != tc.out {
				t.Fatalf("marshals to %s, want %s", b, tc.out)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	tests := []struct {
		in       string
		num      uint8
		ports    bool
		valid    bool
		out      string
		unmarErr bool
	}{
		{`"TCP"`, 6, true, true, `"TCP"`, false},
		{`"udp"`, 17, true, true, `"udp"`, false},
		{`"ICMPv6"`, 58, false, true, `"ICMPv6"`, false},
		{`"SCTP"`, 132, true, true, `"SCTP"`, false},
		{`"UDPLite"`, 136, true, true, `"UDPLite"`, false},
		{`6`, 6, true, true, `6`, false},
		{`"47"`, 47, false, true, `47`, false},
		{`"GRE"`, 0, false, false, `"GRE"`, false},
		{`0`, 0, false, false, ``, true},
		{`256`, 0, false, false, ``, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var p Protocol
			err := json.Unmarshal([]byte(tc.in), &p)
			if tc.unmarErr {
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p.Validate() == nil) != tc.valid {
				t.Fatalf("Validate() = %v, want valid=%v", p.Validate(), tc.valid)
			}
			if p.Number() != tc.num || p.SupportsPorts() != tc.ports {
				t.Fatalf("number %d ports %v", p.Number(), p.SupportsPorts())
			}
			b, _ := json.Marshal(p)
			if string(b) != tc.out {
				t.Fatalf("marshals to %s, want %s", b, tc.out)
			}
		})
	}
}

func TestASNumber(t *testing.T) {
	tests := []struct {
		in      string
		want    ASNumber
		wantErr bool
	}{
		{`64512`, 64512, false},
		{`"64512"`, 64512, false},
		{`"1.10"`, 65546, false},
		{`4294967295`, 4294967295, false},
		{`4294967296`, 0, true},
		{`"1.70000"`, 0, true},
		{`"abc"`, 0, true},
		{`-5`, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var a ASNumber
			err := json.Unmarshal([]byte(tc.in), &a)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && a != tc.want {
				t.Fatalf("got %d, want %d", a, tc.want)
			}
		})
	}
}
