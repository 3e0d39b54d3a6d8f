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

// NFLOGReader reads the verdicts of one NFLOG group in one network
// namespace over an nfnetlink_log socket of its own.
type NFLOGReader struct {
	conn  *netfilter.Conn
	group uint16
}

// Group is the reader's NFLOG group.
func (r *NFLOGReader) Group() uint16 { return r.group }

// OpenNFLOG binds group in the network namespace at netnsPath ("" for
// felix's own).
func OpenNFLOG(netnsPath string, group uint16) (*NFLOGReader, error) {
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
	r := &NFLOGReader{conn: c, group: group}
	if err := c.SetReadBuffer(4 << 20); err != nil {
		c.Close()
		return nil, fmt.Errorf("sizing the NFLOG socket's buffer: %w", err)
	}
	if err := r.config(group, netfilter.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("binding NFLOG group %d (another process may hold it): %w", group, err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, 0xffff) // the rule's --nflog-size limits the copy
	mode[4] = nfulnlCopyPacket
	if err := r.config(group, netfilter.Attribute{Type: nfulaCfgMode, Data: mode}); err != nil {
		c.Close()
		return nil, fmt.Errorf("setting NFLOG group %d's copy mode: %w", group, err)
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

// Close unbinds the group and closes the socket (which unblocks Run).
func (r *NFLOGReader) Close() error {
	_ = r.config(r.group, netfilter.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdUnbind}})
	return r.conn.Close()
}

// Run reads logs until ctx ends or the socket is closed, handing each to
// out. A buffer overrun (the kernel dropped logs) is reported to overrun
// and reading goes on.
func (r *NFLOGReader) Run(ctx context.Context, out func(p Packet), overrun func()) error {
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
				overrun()
				continue
			}
			return fmt.Errorf("reading NFLOG: %w", err)
		}
		for _, m := range msgs {
			h, attrs, err := netfilter.UnmarshalNetlink(m)
			if err != nil || h.SubsystemID != netfilter.NFSubsysULOG || h.MessageType != nfulnlMsgPacket {
				continue
			}
			p, ok := decodeNFLOG(attrs)
			if !ok {
				p = Packet{} // counted as a parse error downstream
			}
			out(p)
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
