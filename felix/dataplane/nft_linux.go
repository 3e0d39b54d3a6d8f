package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/rules"
)

// nftSocketBuffer is the netlink socket's send and receive buffer: a
// transaction is one message (the send buffer must hold it) and the
// kernel queues one acknowledgement per operation before felix reads
// any (as nft does, felix forces them above the system's default limit).
const nftSocketBuffer = 256 << 20

// NftDialer opens the nftables connection the driver uses; the driver
// opens a new one after a failed transaction (whose unread replies would
// otherwise be read as the next one's).
type NftDialer func() (conn NftConn, close func(), err error)

// NewNftDialer dials in the network namespace at netnsPath ("" for
// felix's own).
func NewNftDialer(netnsPath string) NftDialer {
	return func() (NftConn, func(), error) {
		c, closeConn, err := NewNftConn(netnsPath)
		if err != nil {
			return nil, nil, err
		}
		return c, closeConn, nil
	}
}

// forceBuffers sets the socket's buffers to nftSocketBuffer regardless
// of net.core.[rw]mem_max (needs CAP_NET_ADMIN, which felix has).
func forceBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = errors.Join(
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, nftSocketBuffer),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, nftSocketBuffer))
	}); err != nil {
		return err
	}
	return serr
}

// NewNftConn opens a lasting nftables netlink connection in the network
// namespace at netnsPath ("" for felix's own). close releases it.
func NewNftConn(netnsPath string) (conn *nftables.Conn, close func(), err error) {
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(forceBuffers)}
	fd := -1
	if netnsPath != "" {
		if fd, err = unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return nil, nil, fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
		}
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	c, err := nftables.New(opts...)
	if fd >= 0 {
		// A lasting connection's socket is made in New, in the namespace;
		// the namespace file is not needed past that (held open, it
		// would keep the namespace's mount busy).
		unix.Close(fd)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("nftables connection: %w", err)
	}
	return c, func() { _ = c.CloseLasting() }, nil
}

// CleanupNftables removes felix's nftables tables (ip calico and ip6
// calico), as felix does when it runs the iptables dataplane; nothing else
// is touched. It reports whether there was anything to remove.
func CleanupNftables(netnsPath string) (bool, error) {
	c, closeConn, err := NewNftConn(netnsPath)
	if err != nil {
		return false, err
	}
	defer closeConn()
	found := false
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		tables, err := c.ListTablesOfFamily(fam)
		if err != nil {
			return false, fmt.Errorf("listing nftables tables: %w", err)
		}
		for _, t := range tables {
			if t.Name == rules.NftTable {
				c.DelTable(t)
				found = true
			}
		}
	}
	if !found {
		return false, nil
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("removing felix's nftables tables: %w", err)
	}
	return true, nil
}

// CleanupIPSets destroys felix's ipsets (cali4*, cali6*), as felix does
// when it runs the nftables dataplane (its sets are nftables sets then).
// It must run after the iptables rules using them are gone
// (CleanupBackend); a set still in use is an error.
func CleanupIPSets(ctx context.Context, run Runner) (int, error) {
	names := felixIPSets(ctx, run)
	if len(names) == 0 {
		return 0, nil
	}
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "destroy %s\n", name)
	}
	if _, err := run.Run(ctx, "ipset", []string{"restore"}, []byte(b.String())); err != nil {
		return 0, fmt.Errorf("destroying felix's ipsets: %w", err)
	}
	return len(names), nil
}

// HasFelixIPSets says whether the namespace holds any of felix's ipsets.
func HasFelixIPSets(ctx context.Context, run Runner) bool { return len(felixIPSets(ctx, run)) > 0 }

// felixIPSets are the names of felix's ipsets (none without the ipset
// tool or module).
func felixIPSets(ctx context.Context, run Runner) []string {
	out, err := run.Run(ctx, "ipset", []string{"list", "-n"}, nil)
	if err != nil {
		return nil
	}
	var names []string
	for name := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(name, rules.IPSetPrefix+"4") || strings.HasPrefix(name, rules.IPSetPrefix+"6") {
			names = append(names, name)
		}
	}
	return names
}

// KubeProxyNftables reports whether kube-proxy runs in nftables mode in
// the namespace at netnsPath: a table named "kube-proxy" with at least
// one chain in the ip or ip6 family (Calico's check). A kernel without
// nftables has no such table.
func KubeProxyNftables(netnsPath string) (bool, error) {
	c, closeConn, err := NewNftConn(netnsPath)
	if err != nil {
		return false, err
	}
	defer closeConn()
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EPROTONOSUPPORT) {
				return false, nil
			}
			return false, fmt.Errorf("listing nftables chains: %w", err)
		}
		for _, ch := range chains {
			if ch.Table != nil && ch.Table.Name == "kube-proxy" {
				return true, nil
			}
		}
	}
	return false, nil
}
