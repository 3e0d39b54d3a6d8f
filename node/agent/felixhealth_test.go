package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	felixhealth "github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/node/health"
)

// TestFelixHealthNamesPart: calico-node's /readiness shows each of
// felix's readiness checks on its own line, so the failing part and its
// cause are named (the datastore, not "dataplane not in sync").
func TestFelixHealthNamesPart(t *testing.T) {
	a := health.NewAggregator(nil)
	fh := newFelixHealth(a)
	srv := httptest.NewServer(health.Handler(a))
	defer srv.Close()
	read := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readiness")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := read(); code != http.StatusServiceUnavailable || !strings.Contains(body, "felix/settings: FAIL (felix starting)") {
		t.Fatalf("before felix reports: %d %q", code, body)
	}
	ok := func() (bool, string) { return true, "" }
	dsDown := func() (bool, string) { return false, "unreachable: context deadline exceeded" }
	fh.Ready(map[string]felixhealth.Check{"datastore": dsDown, "dataplane": ok, "routes": ok, "settings": ok})
	code, body := read()
	want := "felix/calculation: ok\nfelix/dataplane: ok\nfelix/datastore: FAIL (unreachable: context deadline exceeded)\nfelix/routes: ok\nfelix/settings: ok\n"
	if code != http.StatusServiceUnavailable || body != want {
		t.Fatalf("datastore down: %d\n%s\nwant\n%s", code, body, want)
	}
	fh.Ready(map[string]felixhealth.Check{"datastore": ok, "dataplane": ok, "routes": ok, "settings": ok})
	if code, body := read(); code != http.StatusOK {
		t.Fatalf("all ok: %d %q", code, body)
	}
}
