package agent

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// confdSettings are the environment variables Calico's confd reads (in
// calico-node), each honoured or refused. A refused one that is set is
// logged at ERROR with the reason and what runs instead; confd goes on.
var confdSettings = []struct {
	name   string
	reason string // "" = honoured
}{
	{"NODENAME", ""},
	{"CALICO_ROUTER_ID", ""},
	{"NAMESPACE", ""},
	{"BGP_LOGSEVERITYSCREEN", ""},
	{"CALICO_ADVERTISE_CLUSTER_IPS", "advertising Service cluster IPs is not implemented: BIRD announces the node's pod blocks only"},
	{"CALICO_ENDPOINT_STATUS_PATH_PREFIX", "confd does not read endpoint status files (it announces IPAM blocks, not single workloads)"},
	{"CALICO_K8S_NODE_REF", "confd does not read the Kubernetes Node (the Calico Node resource names the node)"},
}

// typhaPrefixes are where Calico's confd reads its Typha settings from
// (CONFD_TYPHAADDR, FELIX_TYPHAK8SSERVICENAME, ...): for each setting the
// first prefix that has it wins.
var typhaPrefixes = []string{"CONFD_", "FELIX_", "CALICO_"}

// typhaSettings are confd's Typha settings; confd follows Typha when they
// name one (Enabled).
func typhaSettings(getenv func(string) string) (discovery.Settings, error) {
	get := func(v string) string {
		for _, p := range typhaPrefixes {
			if val := strings.TrimSpace(getenv(p + v)); val != "" {
				if strings.EqualFold(val, "none") {
					return ""
				}
				return val
			}
		}
		return ""
	}
	secs := func(v string, def time.Duration) (time.Duration, error) {
		raw := get(v)
		if raw == "" {
			return def, nil
		}
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || f <= 0 {
			return 0, fmt.Errorf("%s=%q: want a positive number of seconds", v, raw)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	s := discovery.Settings{Addr: get("TYPHAADDR"), K8sServiceName: get("TYPHAK8SSERVICENAME"), K8sNamespace: get("TYPHAK8SNAMESPACE"),
		TLS: tlsconfig.Files{CertFile: get("TYPHACERTFILE"), KeyFile: get("TYPHAKEYFILE"), CAFile: get("TYPHACAFILE"),
			CN: get("TYPHACN"), URISAN: get("TYPHAURISAN")}}
	var err error
	if s.ReadTimeout, err = secs("TYPHAREADTIMEOUT", 30*time.Second); err != nil {
		return s, err
	}
	if s.WriteTimeout, err = secs("TYPHAWRITETIMEOUT", 10*time.Second); err != nil {
		return s, err
	}
	return s, nil
}

// refusedSettings lists the refused settings that are set, with reasons.
func refusedSettings(getenv func(string) string) [][2]string {
	var out [][2]string
	for _, s := range confdSettings {
		if s.reason != "" && getenv(s.name) != "" {
			out = append(out, [2]string{s.name, s.reason})
		}
	}
	return out
}

// bgpLogLevel is BGP_LOGSEVERITYSCREEN as Calico's confd reads it (it wins
// over -log-level); ok is false when it is unset.
func bgpLogLevel(getenv func(string) string) (level slog.Level, ok bool, err error) {
	v := strings.ToLower(strings.TrimSpace(getenv("BGP_LOGSEVERITYSCREEN")))
	if v == "" {
		return 0, false, nil
	}
	levels := map[string]slog.Level{"trace": slog.Level(-8), "debug": slog.LevelDebug, "info": slog.LevelInfo,
		"warning": slog.LevelWarn, "warn": slog.LevelWarn, "error": slog.LevelError, "fatal": slog.Level(12), "panic": slog.Level(12)}
	l, found := levels[v]
	if !found {
		names := make([]string, 0, len(levels))
		for n := range levels {
			names = append(names, n)
		}
		slices.Sort(names)
		return 0, false, fmt.Errorf("BGP_LOGSEVERITYSCREEN=%q: use one of %s", v, strings.Join(names, ", "))
	}
	return l, true, nil
}

// levelFollower passes the syncer's output on to confd and sets confd's
// log level from the BGPConfigurations' logSeverityScreen as Calico's
// confd does: the node's ("node.<name>") over the global one ("default")
// over the -log-level flag; BGP_LOGSEVERITYSCREEN, when set, wins over
// all and the resources are not consulted.
type levelFollower struct {
	next         datastore.SyncerCallbacks
	level        *slog.LevelVar
	flag         slog.Level
	node         string
	global, mine string // the resources' severities ("" = absent)
	log          *slog.Logger
}

func (f *levelFollower) OnStatusUpdated(s datastore.SyncStatus) { f.next.OnStatusUpdated(s) }

func (f *levelFollower) OnUpdates(ups []datastore.Update) {
	changed := false
	for _, u := range ups {
		if u.Key.Kind != v3.KindBGPConfiguration || (u.Key.Name != "default" && u.Key.Name != "node."+f.node) {
			continue
		}
		sev := ""
		if bc, ok := u.Object.(*v3.BGPConfiguration); ok && u.Type != datastore.EventDeleted {
			sev = bc.Spec.LogSeverityScreen
		}
		if u.Key.Name == "default" {
			f.global = sev
		} else {
			f.mine = sev
		}
		changed = true
	}
	if changed {
		want := f.flag
		for _, sev := range []string{f.global, f.mine} {
			if sev == "" {
				continue
			}
			if l, ok, err := bgpLogLevel(func(string) string { return sev }); err != nil {
				f.log.Error("BGPConfiguration logSeverityScreen refused", "value", sev, "error", err)
			} else if ok {
				want = l
			}
		}
		if want != f.level.Level() {
			f.log.Info("confd log level changed (BGPConfiguration logSeverityScreen)", "level", want)
			f.level.Set(want)
		}
	}
	f.next.OnUpdates(ups)
}
