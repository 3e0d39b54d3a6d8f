//go:build privileged && integration

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// stream is one TCP connection from a pod to an echo server in another
// pod, carrying a numbered line every 20ms and reading each echo back: a
// connection "in flight" while the test disturbs calico-node. Any error
// (reset, a gap longer than the read timeout) ends it and is kept.
type stream struct {
	mu     sync.Mutex
	echoes int
	err    error
	stop   chan struct{}
	done   chan struct{}
}

// startStream serves an echo on addr inside server and connects to it
// from client.
func startStream(t *testing.T, server, client ns.NetNS, addr string) *stream {
	t.Helper()
	var ln net.Listener
	if err := server.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	var conn net.Conn
	if err := client.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &stream{stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(conn)
	t.Cleanup(func() { s.close() })
	return s
}

func (s *stream) run(conn net.Conn) {
	defer close(s.done)
	defer conn.Close()
	r := bufio.NewReader(conn)
	for seq := 0; ; seq++ {
		select {
		case <-s.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		want := fmt.Sprintf("%d\n", seq)
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		_, err := conn.Write([]byte(want))
		var got string
		if err == nil {
			got, err = r.ReadString('\n')
		}
		if err == nil && got != want {
			err = fmt.Errorf("echo %q, want %q", got, want)
		}
		s.mu.Lock()
		if err != nil {
			s.err = fmt.Errorf("after %d echoes: %w", s.echoes, err)
			s.mu.Unlock()
			return
		}
		s.echoes++
		s.mu.Unlock()
	}
}

// state is the echoes so far and the error that ended the stream.
func (s *stream) state() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.echoes, s.err
}

// flows waits for n more echoes; it fails the test if the stream broke.
func (s *stream) flows(t *testing.T, n int, what string) {
	t.Helper()
	start, _ := s.state()
	eventually(t, 30*time.Second, what, func() (bool, string) {
		got, err := s.state()
		if err != nil {
			t.Fatalf("%s: the TCP stream broke: %v", what, err)
		}
		return got >= start+n, fmt.Sprintf("%d echoes", got-start)
	})
}

func (s *stream) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}
