//go:build integration

package kubecontrollers_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/kubecontrollers"
	"github.com/tabbynet/tabby/kubecontrollers/config"
	"github.com/tabbynet/tabby/kubecontrollers/status"
)

// TestIntegrationHealthAndMetrics: /readiness (and the status file
// check-status reads) is 200 while the API server answers, 503 naming
// the failure while it is down, 200 again when it is back; /metrics serves
// the controllers' metrics.
func TestIntegrationHealthAndMetrics(t *testing.T) {
	c := newCluster(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	spec := v3.KubeControllersDefaults()
	spec.PrometheusMetricsPort = new(port)
	if _, err := c.ds.Create(ctxT(t), &v3.KubeControllersConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindKubeControllersConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "status.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- kubecontrollers.Run(ctx, kubecontrollers.Options{
			Env: config.FromEnv(func(k string) string {
				return map[string]string{"DATASTORE_TYPE": "kubernetes", "ENABLED_CONTROLLERS": "node"}[k]
			}),
			Kube: c.kube, Client: c.ds, Status: status.New(file), ServeMetrics: true, HealthInterval: 200 * time.Millisecond,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	get := func(path string) (int, string) {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	fileReady := func() bool { ok, _, err := status.ReadFile(file); return err == nil && ok }
	eventually(t, "ready", func() (bool, error) {
		code, body := get("/readiness")
		return code == 200 && fileReady(), fmt.Errorf("%d %s", code, body)
	})
	if code, _ := get("/liveness"); code != 200 {
		t.Fatalf("liveness %d", code)
	}
	eventually(t, "metrics served", func() (bool, error) {
		code, body := get("/metrics")
		return code == 200 && strings.Contains(body, "kube_controllers_ipam_gc_pass_seconds_count"), nil
	})

	c.k.Stop()
	eventually(t, "not ready while the API server is down", func() (bool, error) {
		code, body := get("/readiness")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "KubeAPIServer") && !fileReady(), fmt.Errorf("%d %s", code, body)
	})
	c.k.Start()
	eventually(t, "ready again", func() (bool, error) {
		code, body := get("/readiness")
		return code == 200 && fileReady(), fmt.Errorf("%d %s", code, body)
	})
}
