package calc_test

import (
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestGlobalRuleSelectorIPSetIDsAreCalicos: the ipset of a
// GlobalNetworkPolicy rule's plain selector has Calico's ID for that
// selector (Calico's rule conversion passes such a selector through
// unchanged), so its kernel ipset name is the one Calico's felix uses.
// The IDs were computed outside Go (Python hashlib) from Calico's
// algorithm, "s:" + base64url(SHA-224("s:" + canonical)), see
// api/selector TestCalicoUniqueIDs.
func TestGlobalRuleSelectorIPSetIDsAreCalicos(t *testing.T) {
	tests := []struct{ sel, id string }{
		{`(a == 'x' && b == 'y') && c == 'z'`, `s:Tykfr7VKoqjKTik18GazfSvbV0hFYipfhVpyAA`},
		{`a == 'x' && (b == 'y' && c == 'z')`, `s:6-ndjEmJ7PCyyuwkA0onv0KdSOBU7s7R7etvCA`},
		{`has(a)`, `s:JpRGrxZ4kdS6g7WoF-uG_g7qlh2ipw2zGYBMpQ`},
	}
	for _, tc := range tests {
		t.Run(tc.sel, func(t *testing.T) {
			local := ct.WEP("prod", "l", ct.Node, "calil", "10.0.0.9", map[string]string{"app": "web"})
			pol := ct.GNP("p", "default", nil, "app == 'web'", ct.Ingress,
				[]v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{Selector: tc.sel}}}, nil)
			res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), local, pol}))
			if _, ok := res.IPSets[tc.id]; !ok {
				var ids []string
				for id := range res.IPSets {
					ids = append(ids, id)
				}
				t.Errorf("no ipset %s (Calico's ID of %q); have %v", tc.id, tc.sel, ids)
			}
		})
	}
}

// TestServiceSetIDsAreCalicos: the sets of a services match have Calico's
// IDs (the ones Calico's rule scanner test gives for Service default/svc),
// so their kernel names are the ones Calico's felix uses.
func TestServiceSetIDsAreCalicos(t *testing.T) {
	if got, want := calc.ServiceSetID(true, "default/svc"), "svc:Jhwii46PCMT5NlhWsUqZmv7al8TeHFbNQMhoVg"; got != want {
		t.Errorf("destination set ID = %s, want %s", got, want)
	}
	if got, want := calc.ServiceSetID(false, "default/svc"), "svcnoport:T03S_6hogdrGKrNFBcbKTFsH_uKwDHEo8JddOg"; got != want {
		t.Errorf("source set ID = %s, want %s", got, want)
	}
}
