package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/node/birdctl"
	"github.com/tabbynet/tabby/node/birdsup"
)

// metrics are calico-node's own, next to felix's on felix's metrics port
// (FELIX_PROMETHEUSMETRICSENABLED, FELIX_PROMETHEUSMETRICSPORT). They
// outlive felix's runs: each run's registry (felixRegistry) holds them.
type metrics struct {
	confdSyncs *prometheus.CounterVec
	// own are calico-node's collectors, added before felix first starts.
	own []prometheus.Collector
}

func newMetrics() *metrics {
	m := &metrics{confdSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tabby_confd_syncs_total",
		Help: "confd's renders of BIRD's configuration applied (result ok) or not (result error).",
	}, []string{"result"})}
	m.confdSyncs.WithLabelValues("ok")
	m.confdSyncs.WithLabelValues("error")
	m.own = append(m.own, m.confdSyncs)
	return m
}

// felixRegistry is a fresh registry for one run of felix, holding
// calico-node's collectors: felix registers its own metrics anew on each
// run (as a restarted felix process does), which one shared registry
// would refuse as duplicates.
func (m *metrics) felixRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.own...)
	return reg
}

// birdCollector reports BIRD's starts and, at scrape time, its BGP
// sessions by state.
type birdCollector struct {
	sup      *birdsup.Supervisor
	socket   string
	starts   *prometheus.Desc
	up       *prometheus.Desc
	sessions *prometheus.Desc
}

func newBIRDCollector(sup *birdsup.Supervisor, socket string) *birdCollector {
	return &birdCollector{sup: sup, socket: socket,
		starts: prometheus.NewDesc("tabby_bird_starts_total", "Times calico-node started BIRD (more than one: restarts).", nil, nil),
		up:     prometheus.NewDesc("tabby_bird_up", "1 when BIRD runs and answers on its control socket.", nil, nil),
		sessions: prometheus.NewDesc("tabby_bgp_sessions", "BGP sessions by IP version and whether they are Established.",
			[]string{"ip_version", "established"}, nil),
	}
}

func (b *birdCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.starts
	ch <- b.up
	ch <- b.sessions
}

func (b *birdCollector) Collect(ch chan<- prometheus.Metric) {
	up, starts := b.sup.Running()
	ch <- prometheus.MustNewConstMetric(b.starts, prometheus.CounterValue, float64(starts))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var counts [2][2]float64 // [v4,v6][not, established]
	lines, err := birdctl.Command(ctx, b.socket, "show protocols")
	if err != nil {
		up = false
	}
	ch <- prometheus.MustNewConstMetric(b.up, prometheus.GaugeValue, map[bool]float64{true: 1}[up])
	if err != nil {
		return
	}
	for _, p := range birdctl.Peers(lines) {
		v, e := 0, 0
		if p.PeerIP.Is6() {
			v = 1
		}
		if p.Established() {
			e = 1
		}
		counts[v][e]++
	}
	for v, name := range []string{"4", "6"} {
		for e, est := range []string{"false", "true"} {
			ch <- prometheus.MustNewConstMetric(b.sessions, prometheus.GaugeValue, counts[v][e], name, est)
		}
	}
}
