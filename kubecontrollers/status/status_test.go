package status

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestStatusFileAndHandler(t *testing.T) {
	file := filepath.Join(t.TempDir(), "status", "status.json")
	s := New(file)
	if _, _, err := ReadFile(file); err == nil {
		t.Fatal("a status file before any condition")
	}
	s.SetReady("Startup", true, "")
	s.SetReady("KubeAPIServer", false, "Error reaching apiserver")
	ok, reasons, err := ReadFile(file)
	if err != nil || ok || reasons != "KubeAPIServer: Error reaching apiserver" {
		t.Fatalf("ReadFile: %v %q %v", ok, reasons, err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, p := range []string{"/liveness", "/readiness"} {
		r, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %d while not ready", p, r.StatusCode)
		}
	}
	s.SetReady("KubeAPIServer", true, "")
	if ok, _, err := ReadFile(file); err != nil || !ok {
		t.Fatalf("not ready after all conditions are: %v", err)
	}
	r, err := http.Get(srv.URL + "/readiness")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("readiness %d when ready", r.StatusCode)
	}
	// Calico's own status file format reads the same.
	calico := filepath.Join(t.TempDir(), "calico.json")
	os.WriteFile(calico, []byte(`{"Readiness":{"CalicoDatastore":{"Ready":true,"Reason":""},"KubeAPIServer":{"Ready":true,"Reason":""}}}`), 0o644)
	if ok, _, err := ReadFile(calico); err != nil || !ok {
		t.Fatalf("Calico's status file: %v %v", ok, err)
	}
}
