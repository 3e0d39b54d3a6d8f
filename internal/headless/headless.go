// Package headless drives Debian's Chromium without a screen for tests
// and benchmarks of Tabby's pages: it starts `chromium --headless` with
// the DevTools protocol on a loopback port, opens a page and evaluates
// JavaScript in it (Runtime.evaluate over the protocol's WebSocket).
package headless

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// Binary is Debian's Chromium (apt-get install chromium;
// hack/install-packages.sh installs it).
const Binary = "chromium"

// Browser is one headless Chromium with its own profile directory.
type Browser struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	dir  string
}

// Start runs Chromium; Close stops it.
func Start(ctx context.Context) (*Browser, error) {
	path, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("no %s on PATH (apt-get install chromium; hack/install-packages.sh): %w", Binary, err)
	}
	dir, err := os.MkdirTemp("", "tabby-chromium-")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--remote-allow-origins=*", "--user-data-dir="+dir, "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	b := &Browser{cmd: cmd, dir: dir}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var sent bool
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "DevTools listening on ws://"); ok && !sent {
				host, _, _ := strings.Cut(rest, "/")
				found <- "http://" + host
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case base, ok := <-found:
		if !ok {
			b.Close()
			return nil, errors.New("chromium exited before its DevTools port was open")
		}
		b.base = base
	case <-time.After(30 * time.Second):
		b.Close()
		return nil, errors.New("chromium did not open its DevTools port within 30 s")
	}
	return b, nil
}

// Close stops the browser and removes its profile.
func (b *Browser) Close() {
	if b.cmd.Process != nil {
		b.cmd.Process.Kill()
		b.cmd.Wait()
	}
	os.RemoveAll(b.dir)
}

// Page is one tab.
type Page struct {
	ws   *websocket.Conn
	next atomic.Int64
}

// Open opens a new tab at url.
func (b *Browser) Open(url string) (*Page, error) {
	req, _ := http.NewRequest(http.MethodPut, b.base+"/json/new?"+url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("opening a tab: %w", err)
	}
	defer resp.Body.Close()
	var t struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil || t.WebSocketDebuggerURL == "" {
		return nil, fmt.Errorf("opening a tab: %s: %v", resp.Status, err)
	}
	ws, err := websocket.Dial(t.WebSocketDebuggerURL, "", "http://127.0.0.1/")
	if err != nil {
		return nil, fmt.Errorf("connecting to the tab: %w", err)
	}
	return &Page{ws: ws}, nil
}

// Close closes the tab's connection.
func (p *Page) Close() { p.ws.Close() }

// call sends one protocol command and waits for its answer (events on
// the way are skipped).
func (p *Page) call(method string, params any, out any) error {
	id := p.next.Add(1)
	if err := websocket.JSON.Send(p.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return err
	}
	for {
		var msg struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(p.ws, &msg); err != nil {
			return err
		}
		if msg.ID != id {
			continue
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(msg.Result, out)
		}
		return nil
	}
}

// Eval evaluates a JavaScript expression (awaiting a promise) and
// decodes its value into out (nil: ignored).
func (p *Page) Eval(expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
	if err != nil {
		return err
	}
	if res.Exception != nil {
		return fmt.Errorf("javascript: %s %s", res.Exception.Text, res.Exception.Exception.Description)
	}
	if out != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// WaitFor evaluates expr until it is truthy (decoding it into out), or
// fails after timeout.
func (p *Page) WaitFor(expr string, timeout time.Duration, out any) error {
	deadline := time.Now().Add(timeout)
	for {
		var v json.RawMessage
		err := p.Eval(expr, &v)
		if err == nil && len(v) > 0 && string(v) != "null" && string(v) != "false" && string(v) != "0" && string(v) != `""` {
			if out != nil {
				return json.Unmarshal(v, out)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %v for %s: last %s, %v", timeout, expr, v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
