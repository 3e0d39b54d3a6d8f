//go:build privileged && integration

package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedScaleStarts compares felix's start -> ready in the
// two dataplane modes under the same conditions: one etcd loaded once
// with the synthetic cluster (1,000 policies, 110 local endpoints and
// TABBY_SCALE_SIZES remote ones, default 150,000), then cold starts
// alternating iptables, nftables, nftables, iptables, ... (ABBA, so that
// neither mode always goes first after the other), each into a fresh
// namespace; TABBY_SCALE_STARTS pairs (default 3). It reports each mode's
// median and every start with felix's CPU until ready, so that a change
// of the machine's load during the run shows in both modes alike.
//
// Run: make bench-scale-starts
func BenchmarkPrivilegedScaleStarts(b *testing.B) {
	n := 150000
	if s := os.Getenv("TABBY_SCALE_SIZES"); s != "" {
		n, _ = strconv.Atoi(strings.Split(s, ",")[0])
	}
	pairs := 3
	if s := os.Getenv("TABBY_SCALE_STARTS"); s != "" {
		pairs, _ = strconv.Atoi(s)
	}
	bin := buildFelix(b)
	if prebuilt := os.Getenv("TABBY_FELIX_BIN"); prebuilt != "" {
		bin = func() string { return prebuilt }
	}
	for b.Loop() {
		e, _, _ := loadScaleCluster(b, n)
		readies := map[string][]time.Duration{}
		for i := range 2 * pairs {
			mode := dataplaneModes[(i+i/2)%2] // iptables, nftables, nftables, iptables, ...
			_, took, what, stop := coldStart(b, bin(), e, netnstest.NewNode(b), mode)
			stop()
			readies[mode] = append(readies[mode], took)
			b.Logf("remote=%d start %d %s: %s (load average %s)", n, i+1, mode, what, loadAvg())
		}
		for _, mode := range dataplaneModes {
			rs := readies[mode]
			b.Logf("remote=%d %s: start -> ready p50 %v, min %v, max %v over %d starts", n, mode,
				medianOf(rs).Round(time.Millisecond), slices.Min(rs).Round(time.Millisecond), slices.Max(rs).Round(time.Millisecond), len(rs))
			b.ReportMetric(medianOf(rs).Seconds(), mode+"-start-ready-s")
		}
	}
}
