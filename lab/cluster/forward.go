package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Forward listens on each pair's listen address in this process's own
// network namespace (the root one's loopback) and forwards every
// connection to the pair's target, dialled from inside the network
// namespace at netnsPath. No interface or route is added anywhere: it is
// how kubectl and calicoctl on the host reach a control plane that lives
// in its own namespace. Pairs are "listen=target". It runs until ctx ends
// (`tabby-lab cluster forward`, one process per cluster).
func Forward(ctx context.Context, netnsPath string, pairs []string) error {
	target, err := ns.GetNS(netnsPath)
	if err != nil {
		return err
	}
	defer target.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, p := range pairs {
		listen, to, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("forward %q: want listen=target", p)
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", listen, err)
		}
		context.AfterFunc(ctx, func() { ln.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				in, err := ln.Accept()
				if err != nil {
					return
				}
				go forwardConn(target, in, to)
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// forwardConn copies in <-> a connection to `to` made inside target.
func forwardConn(target ns.NetNS, in net.Conn, to string) {
	defer in.Close()
	var out net.Conn
	err := target.Do(func(ns.NetNS) error {
		var err error
		out, err = net.DialTimeout("tcp", to, 5*time.Second)
		return err
	})
	if err != nil {
		return
	}
	defer out.Close()
	go func() {
		_, _ = io.Copy(out, in)
		if tc, ok := out.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(in, out)
}
