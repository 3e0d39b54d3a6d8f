package plugin

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/epstatus"
)

// policyPoll is how often the status file is looked for.
const policyPoll = 5 * time.Millisecond

// waitForPolicy waits, when policy_setup_timeout_seconds is set, until
// felix has written the endpoint's status file (its policy is
// programmed) or the timeout passes. As Calico's plugin, a timeout does
// not fail the ADD: it is logged and pod creation goes on.
func waitForPolicy(ctx context.Context, c *call, ifName string) {
	if c.conf.PolicySetupTimeoutSeconds <= 0 {
		return
	}
	name := epstatus.Filename(&v3.WorkloadEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: c.id.namespace},
		Spec: v3.WorkloadEndpointSpec{Orchestrator: c.id.orchestrator, Pod: c.id.pod, Workload: c.id.workload, Endpoint: ifName}})
	path := filepath.Join(c.conf.EndpointStatusDir, name)
	timeout := time.Duration(c.conf.PolicySetupTimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(policyPoll)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			slog.Warn("policy not programmed in time; unblocking pod creation", "statusFile", path, "timeout", timeout)
			return
		case <-tick.C:
		}
	}
}
