package agent

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	felixconfig "github.com/tabbynet/tabby/felix/config"
	"github.com/tabbynet/tabby/node/registration"
)

// Not Calico's names (Calico's paths are fixed): where BIRD's
// configuration and control socket live, so that tests can run several
// nodes on one host. Defaults are Calico's paths.
const (
	envBIRDConfig = "TABBY_BIRD_CONFIG"
	envBIRDSocket = "TABBY_BIRD_SOCKET"

	DefaultBIRDConfig = "/etc/calico/confd/config/bird.cfg"
	DefaultBIRDSocket = "/var/run/calico/bird.ctl"
)

// Paths are the files calico-node uses, from the environment.
type Paths struct {
	BIRDConfig, BIRDSocket, BIRDPidFile string
}

// birdHangTimeout is TABBY_BIRD_HANG_TIMEOUT (not Calico's; a Go
// duration): how long BIRD may not answer before it is restarted (0:
// the supervisor's default).
func birdHangTimeout(getenv func(string) string) (time.Duration, error) {
	v := getenv("TABBY_BIRD_HANG_TIMEOUT")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("TABBY_BIRD_HANG_TIMEOUT=%q: use a duration such as 30s", v)
	}
	return d, nil
}

// PathsFromEnv reads TABBY_BIRD_CONFIG and TABBY_BIRD_SOCKET (the pid
// file sits next to the socket).
func PathsFromEnv(getenv func(string) string) Paths {
	p := Paths{BIRDConfig: getenv(envBIRDConfig), BIRDSocket: getenv(envBIRDSocket)}
	if p.BIRDConfig == "" {
		p.BIRDConfig = DefaultBIRDConfig
	}
	if p.BIRDSocket == "" {
		p.BIRDSocket = DefaultBIRDSocket
	}
	p.BIRDPidFile = strings.TrimSuffix(p.BIRDSocket, ".ctl") + ".pid"
	return p
}

// HealthAddr is Calico's health endpoint address: FELIX_HEALTHHOST
// (localhost) and FELIX_HEALTHPORT (9099).
func HealthAddr(getenv func(string) string) string {
	host, port := getenv("FELIX_HEALTHHOST"), getenv("FELIX_HEALTHPORT")
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "9099"
	}
	return net.JoinHostPort(host, port)
}

// logLevel is FELIX_LOGSEVERITYSCREEN's level (Info by default): one
// log for all of calico-node's parts.
func logLevel(getenv func(string) string) slog.Level {
	switch strings.ToLower(getenv("FELIX_LOGSEVERITYSCREEN")) {
	case "debug":
		return slog.LevelDebug
	case "warning", "warn":
		return slog.LevelWarn
	case "error", "fatal", "panic":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// overlay is getenv with some variables replaced.
func overlay(getenv func(string) string, set map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return getenv(k)
	}
}

// ipv6Supported is Calico's: FELIX_IPV6SUPPORT not false and the kernel
// has IPv6.
func ipv6Supported(getenv func(string) string) bool {
	switch strings.ToLower(getenv("FELIX_IPV6SUPPORT")) {
	case "false", "0", "no", "n", "f":
		return false
	}
	_, err := os.Stat("/proc/sys/net/ipv6")
	return err == nil
}

// tunnelOptions are the felix settings in calico-node's own environment
// that shape its tunnel addresses, read as felix reads them (Calico's
// calico-node reads FELIX_WIREGUARDHOSTENCRYPTIONENABLED from its
// environment only; an unparsable value counts as the default, false).
func tunnelOptions(getenv func(string) string) registration.TunnelOptions {
	const name = "WireguardHostEncryptionEnabled"
	env := map[string]string{}
	if v := getenv("FELIX_" + strings.ToUpper(name)); v != "" {
		env[name] = v
	}
	s, err := felixconfig.Resolve(felixconfig.Sources{Env: env})
	if err != nil {
		return registration.TunnelOptions{}
	}
	return registration.TunnelOptions{WireguardHostEncryption: s.Bool(name)}
}
