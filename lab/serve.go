package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// ParsePorts parses "tcp/80,udp/81".
func ParsePorts(s string) ([]Port, error) {
	var out []Port
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		proto, num, ok := strings.Cut(f, "/")
		n, err := strconv.Atoi(num)
		proto = strings.ToUpper(proto)
		if !ok || err != nil || n < 1 || n > 65535 || (proto != "TCP" && proto != "UDP") {
			return nil, fmt.Errorf("port %q: use tcp/<n> or udp/<n>", f)
		}
		out = append(out, Port{Port: n, Protocol: proto})
	}
	if len(out) == 0 {
		return nil, errors.New("no ports given")
	}
	return out, nil
}

// Serve is a pod's workload (`tabby-lab serve`, run inside the pod's
// namespace): on each TCP port it answers every connection with the pod's
// id and a newline, on each UDP port every datagram with the id. It runs
// until ctx ends.
func Serve(ctx context.Context, id string, ports []Port) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(ports))
	var closers []func()
	for _, p := range ports {
		addr := net.JoinHostPort("", strconv.Itoa(p.Port))
		if p.Protocol == "UDP" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("serving %s: %w", p, err)
			}
			closers = append(closers, func() { pc.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 2048)
				for {
					_, from, err := pc.ReadFrom(buf)
					if err != nil {
						errc <- err
						return
					}
					_, _ = pc.WriteTo([]byte(id+"\n"), from)
				}
			}()
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serving %s: %w", p, err)
		}
		closers = append(closers, func() { ln.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				go func() {
					defer c.Close()
					_, _ = c.Write([]byte(id + "\n"))
				}()
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, c := range closers {
		c()
	}
	wg.Wait()
	return err
}
