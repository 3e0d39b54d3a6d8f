package plugin

import (
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/tabbynet/tabby/cni-plugin/cnilog"
)

// logged wraps one command with the plugin's log, configured by the
// network configuration's log_level, log_file_path and rotation keys as
// Calico's plugin is (see cni-plugin/cnilog): the call and its outcome at
// INFO (a failure at ERROR), the configuration at DEBUG.
func (p *Plugin) logged(cmd string, f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(a *skel.CmdArgs) error {
		var stderr io.Writer = os.Stderr
		if p.LogStderr != nil {
			stderr = p.LogStderr
		}
		log, closeLog := cnilog.Open(cnilog.FromConfig(a.StdinData), stderr, time.Now)
		defer closeLog()
		log = log.With("command", cmd, "containerID", a.ContainerID, "ifName", a.IfName)
		log.Info("calico CNI plugin called", "netns", a.Netns, "args", a.Args)
		log.Debug("network configuration", "config", string(a.StdinData))
		start := time.Now()
		err := f(a)
		if err != nil {
			log.Error("calico CNI plugin failed", "error", err, "duration", time.Since(start))
			return err
		}
		log.Info("calico CNI plugin done", "duration", time.Since(start))
		return nil
	}
}
