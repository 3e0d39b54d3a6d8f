package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// slogLevels maps Calico's (logrus') level names to slog levels; panic and
// fatal, Calico's default, log nothing a command normally produces.
var slogLevels = map[string]slog.Level{
	"panic": slog.LevelError + 8, "fatal": slog.LevelError + 4,
	"error": slog.LevelError, "warn": slog.LevelWarn, "warning": slog.LevelWarn,
	"info": slog.LevelInfo, "debug": slog.LevelDebug, "trace": slog.LevelDebug - 4,
}

// applyGlobalFlags acts on --log-level and checks the global flags.
func (a *app) applyGlobalFlags() error {
	level, ok := slogLevels[strings.ToLower(a.logLevel)]
	if !ok {
		return fmt.Errorf("unknown log level: %s, expected one of: panic, fatal, error, warn, info, debug", a.logLevel)
	}
	a.logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	if a.setDefaultLogger {
		slog.SetDefault(a.logger)
	}
	return nil
}

// log is the command's logger (a discarding one before flags are parsed).
func (a *app) log() *slog.Logger {
	if a.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.logger
}

// env is the environment the datastore configuration reads; --context
// sets K8S_CURRENT_CONTEXT, as in Calico's calicoctl.
func (a *app) env(name string) string {
	if name == "K8S_CURRENT_CONTEXT" && a.kubeContext != "" {
		return a.kubeContext
	}
	return a.getenv(name)
}

// clientVersion is this calicoctl's version.
func (a *app) clientVersion() string {
	if a.version != "" {
		return a.version
	}
	return Version
}

// checkVersionMismatch is Calico's check: the client's major.minor.patch
// (without "v" and any "-suffix") must equal the cluster's
// ClusterInformation calicoVersion. No ClusterInformation, or no version in
// it, passes; so does an unversioned development build ("dev"), which has
// nothing to compare.
func (a *app) checkVersionMismatch(c datastore.Client) error {
	if a.allowMismatch {
		a.log().Info("Skip version mismatch checking due to '--allow-version-mismatch' argument")
		return nil
	}
	client := a.clientVersion()
	if client == "dev" {
		return nil
	}
	r, err := c.Get(context.Background(), datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	if errors.Is(err, datastore.ErrNotFound) {
		a.log().Info("Skip version mismatch checking due to ClusterInformation not being present")
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to get Cluster Information to verify version mismatch: %w\nUse --allow-version-mismatch to override", err)
	}
	cluster := r.(*v3.ClusterInformation).Spec.CalicoVersion
	if cluster == "" {
		return nil
	}
	short := func(v string) string { return strings.Split(strings.TrimPrefix(v, "v"), "-")[0] }
	if short(cluster) != short(client) {
		return fmt.Errorf("version mismatch.\nClient Version:   %s\nCluster Version:  %s\nUse --allow-version-mismatch to override", client, short(cluster))
	}
	return nil
}
