package dataplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
)

// Member changes through netlink.
//
// Each namespace path has one long-lived NETLINK_NETFILTER socket (a
// netlink.Handle), opened lazily on the namespace's worker thread
// (exec_netns_linux.go): a socket belongs to the namespace it was created
// in for good, so it can then be used from any goroutine. A handle is
// dropped, and the next call opens a new one, when a request on it fails,
// when the path names another namespace than the one it was opened in,
// and when it has not been used for ipsetHandles.idle (ExecRunner is a
// value with no Close, and a socket keeps its namespace alive).

// ipsetHandles is the registry of open handles, by namespace path ("":
// the caller's namespace).
var ipsetHandles = struct {
	sync.Mutex
	byPath map[string]*ipsetHandle
	// idle is how long an unused handle stays open.
	idle time.Duration
}{byPath: map[string]*ipsetHandle{}, idle: 10 * time.Second}

// ipsetRequestTimeout bounds one request's wait for the kernel's answer,
// so that a wedged socket fails the apply (and is replaced) instead of
// hanging the dataplane.
const ipsetRequestTimeout = 10 * time.Second

type ipsetHandle struct {
	path string
	h    *netlink.Handle
	ns   nsID // the namespace it was opened in

	// Guarded by ipsetHandles.
	users    int
	lastUsed time.Time
	dropped  bool // out of the registry: closed by its last user
}

// UpdateIPSetMembers implements IPSetMembers with netlink requests in r's
// namespace (see the comment at the top of this file). Every member is
// parsed before the first request, so that one it cannot write changes
// nothing.
func (r ExecRunner) UpdateIPSetMembers(ctx context.Context, updates []IPSetMemberUpdate) error {
	n := 0
	for _, u := range updates {
		n += len(u.Del) + len(u.Add)
	}
	parsed := make([]ipsetMember, 0, n)
	for _, u := range updates {
		for _, list := range [][]string{u.Del, u.Add} {
			for _, m := range list {
				e, err := parseIPSetMember(u.Type, u.Family, m)
				if err != nil {
					return fmt.Errorf("ipset %s: %w", u.Set, err)
				}
				parsed = append(parsed, e)
			}
		}
	}
	where := ""
	if r.NetnsPath != "" {
		where = " in network namespace " + r.NetnsPath
	}
	h, err := acquireIPSetHandle(ctx, r.NetnsPath)
	if err != nil {
		return fmt.Errorf("opening a netlink socket for ipsets%s: %w", where, err)
	}
	failed := false
	defer func() { releaseIPSetHandle(h, failed) }()
	i := 0
	for _, u := range updates {
		for _, op := range []struct {
			cmd     int
			verb    string
			members []string
		}{{nl.IPSET_CMD_DEL, "deleting", u.Del}, {nl.IPSET_CMD_ADD, "adding", u.Add}} {
			for _, m := range op.members {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("updating ipset %s%s: %w", u.Set, where, err)
				}
				if err := ipsetAddDel(h.h, op.cmd, u.Set, u.Type, parsed[i]); err != nil {
					failed = true
					return fmt.Errorf("%s %s in ipset %s%s (netlink): %w", op.verb, m, u.Set, where, err)
				}
				i++
			}
		}
	}
	return nil
}

// ipsetAddDel sends one add or delete of e to set and waits for the
// kernel's answer. Replace leaves NLM_F_EXCL off, so the kernel treats an
// existing (add) or missing (del) member as success, as `ipset -exist`
// does.
func ipsetAddDel(h *netlink.Handle, cmd int, set string, typ calc.IPSetType, e ipsetMember) error {
	entry := netlink.IPSetEntry{IP: e.addr.AsSlice(), Replace: true}
	if typ == calc.HashNet {
		entry.CIDR = e.bits
	} else {
		entry.Protocol, entry.Port = &e.proto, &e.port
	}
	return recoverPanic(func() error {
		if cmd == nl.IPSET_CMD_ADD {
			return h.IpsetAdd(set, &entry)
		}
		return h.IpsetDel(set, &entry)
	})
}

// recoverPanic calls f, turning a panic into an error: netlink's
// ipsetExecute asserts that every failure is a syscall.Errno and panics
// on the others (a wrong sender or sequence number, a truncated answer).
func recoverPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = fmt.Errorf("netlink ipset request failed: %w", e)
				return
			}
			err = fmt.Errorf("netlink ipset request failed: %v", p)
		}
	}()
	return f()
}

// acquireIPSetHandle returns the open handle for path, opening one if
// there is none (or the one there is for another namespace), and counts
// the caller as its user.
func acquireIPSetHandle(ctx context.Context, path string) (*ipsetHandle, error) {
	idPath := path
	if path == "" {
		// The caller's namespace, as for commands: a goroutine locked
		// to a thread in another namespace gets a socket there.
		idPath = "/proc/thread-self/ns/net"
	}
	id, err := namespaceOf(idPath)
	if err != nil {
		return nil, err
	}
	reg := &ipsetHandles
	reg.Lock()
	if h := reg.byPath[path]; h != nil {
		if h.ns == id {
			h.users++
			reg.Unlock()
			return h, nil
		}
		h.drop()
	}
	reg.Unlock()

	nh, err := openIPSetHandle(ctx, path)
	if err != nil {
		return nil, err
	}
	h := &ipsetHandle{path: path, h: nh, ns: id, users: 1, lastUsed: time.Now()}
	reg.Lock()
	defer reg.Unlock()
	if old := reg.byPath[path]; old != nil {
		// Opened by another caller meanwhile: ours replaces it (both
		// are for the namespace path names now).
		old.drop()
	}
	reg.byPath[path] = h
	time.AfterFunc(reg.idle, h.retireIfIdle)
	return h, nil
}

// openIPSetHandle opens a netfilter netlink socket in the namespace at
// path (the calling thread's when path is "").
func openIPSetHandle(ctx context.Context, path string) (*netlink.Handle, error) {
	var h *netlink.Handle
	open := func() (err error) {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
		return err
	}
	var err error
	if path == "" {
		err = open()
	} else {
		err = runInNetns(ctx, path, open)
	}
	if err != nil {
		return nil, err
	}
	if err := h.SetSocketTimeout(ipsetRequestTimeout); err != nil {
		h.Close()
		return nil, fmt.Errorf("setting the netlink socket's timeout: %w", err)
	}
	return h, nil
}

// releaseIPSetHandle ends a use of h; a failed request drops it, so that
// the next call opens a fresh socket.
func releaseIPSetHandle(h *ipsetHandle, failed bool) {
	ipsetHandles.Lock()
	defer ipsetHandles.Unlock()
	h.users--
	h.lastUsed = time.Now()
	if failed {
		h.drop()
	}
	h.closeIfDone()
}

// drop takes h out of the registry (ipsetHandles held); it is closed once
// unused.
func (h *ipsetHandle) drop() {
	if ipsetHandles.byPath[h.path] == h {
		delete(ipsetHandles.byPath, h.path)
	}
	h.dropped = true
	h.closeIfDone()
}

func (h *ipsetHandle) closeIfDone() {
	if h.dropped && h.users == 0 && h.h != nil {
		h.h.Close()
		h.h = nil
	}
}

// retireIfIdle closes h if it has not been used for ipsetHandles.idle,
// and otherwise checks again when it would be.
func (h *ipsetHandle) retireIfIdle() {
	reg := &ipsetHandles
	reg.Lock()
	defer reg.Unlock()
	if h.dropped {
		h.closeIfDone()
		return
	}
	switch since := time.Since(h.lastUsed); {
	case h.users > 0:
		time.AfterFunc(reg.idle, h.retireIfIdle)
	case since < reg.idle:
		time.AfterFunc(reg.idle-since, h.retireIfIdle)
	default:
		h.drop()
	}
}
