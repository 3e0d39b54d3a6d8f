package birdctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Line is one reply line: its code (0 for a continuation line, which
// belongs to the code before it) and its text.
type Line struct {
	Code int
	Text string
}

// ErrBIRD is wrapped by the error of a command BIRD refused (a reply
// code 8000-9999).
var ErrBIRD = errors.New("BIRD refused the command")

// DefaultTimeout bounds one command when ctx has no deadline.
const DefaultTimeout = 5 * time.Second

// Command connects to the control socket, runs one command and returns
// BIRD's reply lines (without the greeting).
func Command(ctx context.Context, socket, cmd string) ([]Line, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connecting to BIRD at %s: %w", socket, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := readReply(r); err != nil { // the "0001 BIRD x.y ready." greeting
		return nil, fmt.Errorf("reading BIRD's greeting on %s: %w", socket, err)
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return nil, fmt.Errorf("sending %q to BIRD: %w", cmd, err)
	}
	lines, err := readReply(r)
	if err != nil {
		return nil, fmt.Errorf("reading BIRD's reply to %q: %w", cmd, err)
	}
	if last := lines[len(lines)-1]; last.Code >= 8000 {
		return lines, fmt.Errorf("%w %q: %s", ErrBIRD, cmd, last.Text)
	}
	return lines, nil
}

// readReply reads lines up to the one whose code is followed by a space
// (the last of a reply).
func readReply(r *bufio.Reader) ([]Line, error) {
	var out []Line
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			return out, err
		}
		s = strings.TrimRight(s, "\r\n")
		l, last, ok := parseLine(s)
		if !ok {
			return out, fmt.Errorf("unexpected line from BIRD: %q", s)
		}
		out = append(out, l)
		if last {
			return out, nil
		}
	}
}

// parseLine splits "1002-text" (more follows), "0000 text" (last) and
// " text" (continuation).
func parseLine(s string) (l Line, last, ok bool) {
	if strings.HasPrefix(s, " ") {
		return Line{Text: s[1:]}, false, true
	}
	if len(s) < 5 {
		return Line{}, false, false
	}
	code := 0
	for _, c := range s[:4] {
		if c < '0' || c > '9' {
			return Line{}, false, false
		}
		code = code*10 + int(c-'0')
	}
	switch s[4] {
	case '-':
		return Line{Code: code, Text: s[5:]}, false, true
	case ' ':
		return Line{Code: code, Text: s[5:]}, true, true
	}
	return Line{}, false, false
}
