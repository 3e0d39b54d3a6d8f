package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	felixconfig "github.com/tabbynet/tabby/felix/config"
	"github.com/tabbynet/tabby/felix/rules"
)

// ErrConfigChanged is returned by Run when a setting that is applied at
// start changed in the datastore: felix stops so that it is restarted with
// it, as Calico's felix does.
var ErrConfigChanged = errors.New("felix configuration changed; restart to apply it")

// settingsState holds the local sources (environment, file), the last
// resolved settings and the problems already reported. Problems are
// logged once when they appear (ERROR for refused and invalid values) and
// exported as tabby_felix_config_problems{setting,source,kind,reason}.
type settingsState struct {
	env, file map[string]string
	log       *slog.Logger
	metric    *prometheus.GaugeVec
	// secMetric is tabby_felix_security_settings_unhonoured.
	secMetric prometheus.Gauge
	logs      *logOutputs // nil when the caller gave the logger
	// security is why felix is not ready ("" when it may be): the
	// security settings set to values it cannot honour.
	security atomic.Pointer[string]

	mu       sync.Mutex
	current  *felixconfig.Settings
	cfg      config
	reported map[string]bool
	global   *v3.FelixConfigurationSpec
	node     *v3.FelixConfigurationSpec
	rc       rules.Config
	restart  func(error)
	getenv   func(string) string
}

// newSettingsState is the state over the local sources, its metrics
// registered with reg.
func newSettingsState(env, file map[string]string, log *slog.Logger, reg prometheus.Registerer, logs *logOutputs, getenv func(string) string) *settingsState {
	sec := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_security_settings_unhonoured",
		Help: "Security settings (WireGuard, eBPF, ...: see the README) set to values felix cannot honour; felix is not ready while this is above 0."})
	reg.MustRegister(sec)
	return &settingsState{env: env, file: file, log: log, metric: newProblemMetric(reg), secMetric: sec, logs: logs, getenv: getenv}
}

func newProblemMetric(reg prometheus.Registerer) *prometheus.GaugeVec {
	m := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_felix_config_problems",
		Help: "Felix settings not taken as given (1 per setting and source): kind is refused (a value Tabby does not implement; reason says what runs instead), invalid (the default is used), unknown or local-only (ignored)."},
		[]string{"setting", "source", "kind", "reason"})
	reg.MustRegister(m)
	return m
}

// report logs the problems not reported before and sets the metric.
func (st *settingsState) report(s *felixconfig.Settings) {
	now := map[string]bool{}
	st.metric.Reset()
	for _, p := range s.Problems {
		key := p.String()
		now[key] = true
		st.metric.WithLabelValues(p.Setting, p.Source.String(), string(p.Kind), p.Reason).Set(1)
		if st.reported[key] {
			continue
		}
		attrs := []any{"setting", p.Setting, "value", p.Raw, "source", p.Source.String(), "reason", p.Reason}
		switch p.Kind {
		case felixconfig.ProblemRefused:
			st.log.Error("felix setting refused", attrs...)
		case felixconfig.ProblemInvalid:
			st.log.Error("felix setting invalid", attrs...)
		default:
			st.log.Warn("felix setting ignored", attrs...)
		}
	}
	st.reported = now
	st.noteSecurity(s.SecurityProblems())
}

// noteSecurity records (metric, readiness reason, one ERROR line per
// change) the security settings felix cannot honour.
func (st *settingsState) noteSecurity(probs []felixconfig.Problem) {
	why := securityReason(probs)
	if st.secMetric != nil {
		st.secMetric.Set(float64(len(probs)))
	}
	old := st.security.Swap(&why)
	if old != nil && *old == why {
		return
	}
	if why != "" {
		st.log.Error("felix is not ready: a security setting cannot be honoured; remove it (or set it to its default) to run without it", "reason", why)
	} else if old != nil && *old != "" {
		st.log.Info("no security setting is refused any more")
	}
}

// securityReason is the readiness reason for probs ("" for none).
func securityReason(probs []felixconfig.Problem) string {
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = fmt.Sprintf("%s=%s (%s) cannot be honoured: %s", p.Setting, p.Raw, p.Source, p.Reason)
	}
	return strings.Join(parts, "; ")
}

// Ready is the settings' readiness check: not ready while a security
// setting is set to a value felix cannot honour.
func (st *settingsState) Ready() (bool, string) {
	why := st.security.Load()
	if why == nil {
		return false, "configuration not read yet"
	}
	return *why == "", *why
}

// resolve merges the local sources with the datastore's specs.
func (st *settingsState) resolve(global, node *v3.FelixConfigurationSpec) (*felixconfig.Settings, error) {
	return felixconfig.Resolve(felixconfig.Sources{Env: st.env, File: st.file, Global: global, Node: node})
}

// fetchSpecs reads the global and the node's FelixConfiguration, retrying
// (and logging) while the datastore does not answer, as Calico's felix
// waits for its configuration before it starts.
func fetchSpecs(ctx context.Context, c datastore.Client, node string, log *slog.Logger) (global, nodeSpec *v3.FelixConfigurationSpec, err error) {
	get := func(name string) (*v3.FelixConfigurationSpec, error) {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := c.Get(gctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: name})
		if errors.Is(err, datastore.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		fc, ok := r.(*v3.FelixConfiguration)
		if !ok {
			return nil, fmt.Errorf("FelixConfiguration %s is a %T", name, r)
		}
		return &fc.Spec, nil
	}
	for {
		if global, err = get("default"); err == nil {
			if nodeSpec, err = get(v3.FelixConfigurationNamePrefix + node); err == nil {
				return global, nodeSpec, nil
			}
		}
		log.Error("reading felix's configuration from the datastore; retrying", "error", err)
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// onDatastore is the daemon's RulesConfig: it re-resolves the settings
// when a FelixConfiguration changed, reports new problems, applies the
// live settings (log levels, rendering) and stops felix (restart) when a
// setting applied at start changed.
func (st *settingsState) onDatastore(global, node *v3.FelixConfigurationSpec) rules.Config {
	st.mu.Lock()
	defer st.mu.Unlock()
	if global == st.global && node == st.node {
		return st.rc
	}
	st.global, st.node = global, node
	s, err := st.resolve(global, node)
	st.report(s)
	if err != nil {
		st.log.Error("felix configuration from the datastore cannot be used; restarting", "error", err)
		st.restart(err)
		return st.rc
	}
	live, restart := s.Changed(st.current)
	cfg, cerr := fromSettings(s, st.getenv)
	if cerr != nil {
		st.log.Error("felix configuration from the datastore cannot be used; restarting", "error", cerr)
		st.restart(cerr)
		return st.rc
	}
	if len(live) > 0 {
		st.log.Info("felix settings changed; applied live", "settings", strings.Join(live, ","))
	}
	if st.logs != nil {
		st.logs.screen.Set(calicoLevel(cfg.logScreen))
		st.logs.file.Set(calicoLevel(cfg.logFile))
	}
	if len(restart) > 0 {
		st.log.Warn("felix settings changed that apply at start; restarting felix", "settings", strings.Join(restart, ","))
		st.restart(fmt.Errorf("%w: %s", ErrConfigChanged, strings.Join(restart, ",")))
	}
	st.current, st.cfg = s, cfg
	st.rc = rulesConfig(cfg, s)
	return st.rc
}
