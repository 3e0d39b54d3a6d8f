package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"
)

// nfnetlink_log's message types and attributes (linux/netfilter/nfnetlink_log.h).
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1

	nfulaCfgCmd  = 1
	nfulaCfgMode = 2

	nfulnlCfgCmdBind   = 1
	nfulnlCfgCmdUnbind = 2
	nfulnlCopyPacket   = 2

	nfulaPayload = 9
	nfulaPrefix  = 10
)

// NFLOGReader reads the verdicts of NFLOG groups from one network
// namespace over one nfnetlink_log socket.
type NFLOGReader struct {
	conn   *netfilter.Conn
	groups []uint16
	// Overruns counts the times the kernel dropped logs because the
	// socket's buffer was full (ENOBUFS).
	Overruns int
}

// OpenNFLOG binds groups in the network namespace at netnsPath ("" for
// felix's own).
func OpenNFLOG(netnsPath string, groups ...uint16) (*NFLOGReader, error) {
	cfg := &netlink.Config{}
	if netnsPath != "" {
		f, err := os.Open(netnsPath)
		if err != nil {
			return nil, fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netfilter.Dial(cfg)
	if err != nil {
		return nil, fmt.Errorf("opening an nfnetlink socket: %w", err)
	}
	r := &NFLOGReader{conn: c, groups: groups}
	if err := c.SetReadBuffer(4 << 20); err != nil {
		c.Close()
		return nil, fmt.Errorf("sizing the NFLOG socket's buffer: %w", err)
	}
	for _, g := range groups {
		if err := r.config(g, netfilter.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}); err != nil {
			c.Close()
			return nil, fmt.Errorf("binding NFLOG group %d (another process may hold it): %w", g, err)
		}
		mode := make([]byte, 6)
		binary.BigEndian.PutUint32(mode, 0xffff) // the rule's --nflog-size limits the copy
		mode[4] = nfulnlCopyPacket
		if err := r.config(g, netfilter.Attribute{Type: nfulaCfgMode, Data: mode}); err != nil {
			c.Close()
			return nil, fmt.Errorf("setting NFLOG group %d's copy mode: %w", g, err)
		}
	}
	return r, nil
}

func (r *NFLOGReader) config(group uint16, attr netfilter.Attribute) error {
	m, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysULOG, MessageType: nfulnlMsgConfig,
		Family: netfilter.ProtoUnspec, ResourceID: group,
		Flags: netlink.Request | netlink.Acknowledge,
	}, []netfilter.Attribute{attr})
	if err != nil {
		return err
	}
	_, err = r.conn.Query(m)
	return err
}

// Close unbinds the groups and closes the socket (which unblocks Run).
func (r *NFLOGReader) Close() error {
	for _, g := range r.groups {
		_ = r.config(g, netfilter.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdUnbind}})
	}
	return r.conn.Close()
}

// Run reads logs until ctx ends or the socket is closed, handing each to
// out with its group. A buffer overrun is counted and reading goes on.
func (r *NFLOGReader) Run(ctx context.Context, out func(group uint16, p Packet)) error {
	go func() {
		<-ctx.Done()
		r.conn.Close()
	}()
	for {
		msgs, err := r.conn.Receive()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, unix.ENOBUFS) || errors.Is(err, syscall.ENOBUFS) {
				r.Overruns++
				continue
			}
			return fmt.Errorf("reading NFLOG: %w", err)
		}
		for _, m := range msgs {
			h, attrs, err := netfilter.UnmarshalNetlink(m)
			if err != nil || h.SubsystemID != netfilter.NFSubsysULOG || h.MessageType != nfulnlMsgPacket {
				continue
			}
			if p, ok := decodeNFLOG(attrs); ok {
				out(h.ResourceID, p)
			}
		}
	}
}

// decodeNFLOG reads the prefix and the packet's tuple and length.
func decodeNFLOG(attrs []netfilter.Attribute) (Packet, bool) {
	var p Packet
	var payload []byte
	for _, a := range attrs {
		switch a.Type {
		case nfulaPrefix:
			b := a.Data
			if i := indexByte(b, 0); i >= 0 {
				b = b[:i]
			}
			p.Prefix = string(b)
		case nfulaPayload:
			payload = a.Data
		}
	}
	t, n, ok := ParseIPHeader(payload)
	p.Tuple, p.Bytes = t, n
	return p, ok && p.Prefix != ""
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
