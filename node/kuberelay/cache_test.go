package kuberelay

import "testing"

func TestParsePath(t *testing.T) {
	for _, c := range []struct {
		path          string
		ok            bool
		res, ns, name string
	}{
		{"/api/v1/namespaces/default/pods/p1", true, "pods", "default", "p1"},
		{"/api/v1/namespaces/default", true, "namespaces", "", "default"},
		{"/api/v1/namespaces", true, "namespaces", "", ""},
		{"/api/v1/nodes/n1", true, "nodes", "", "n1"},
		{"/apis/crd.projectcalico.org/v1/ippools", true, "ippools", "", ""},
		{"/apis/crd.projectcalico.org/v1/ipamblocks/10-0-0-0-26", true, "ipamblocks", "", "10-0-0-0-26"},
		{"/api/v1/namespaces/default/pods/p1/status", false, "", "", ""},
		{"/apis/crd.projectcalico.org/v1/ipamblocks/", false, "", "", ""},
		{"/apis/apps/v1/deployments", false, "", "", ""},
		{"/version", false, "", "", ""},
	} {
		r, ok := parsePath(c.path)
		if ok != c.ok || ok && (r.gvr.Resource != c.res || r.namespace != c.ns || r.name != c.name) {
			t.Errorf("parsePath(%q) = %+v, %v; want %s %q %q, %v", c.path, r, ok, c.res, c.ns, c.name, c.ok)
		}
	}
}

func TestSameSelector(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"a=b", "a=b", true},
		{"a=b,c=d", "c=d,a=b", true},
		{"a=b", "a=c", false},
		{"a=b", "", false},
		{"!a", "!a", true},
		{"a in (", "a in (", true}, // equal strings need no parsing
		{"a in (", "a=b", false},
	} {
		if got := sameSelector(c.a, c.b); got != c.want {
			t.Errorf("sameSelector(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
