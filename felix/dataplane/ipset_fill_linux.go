package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
)

// fillBatch is the number of members one netlink message adds (~40
// bytes each; `ipset restore` batches the same way).
const fillBatch = 1000

// FillIPSets implements IPSetFiller: every member is parsed first (one it
// cannot write changes nothing), then each set's members are added in
// messages of fillBatch (IPSET_CMD_ADD with a list of entries, the
// kernel's batch form, which vishvananda/netlink does not build), on a
// netfilter socket opened in r's namespace for the call. The messages are
// composed with netlink's own attribute and request types; a member
// already there is no error (no NLM_F_EXCL), as with `ipset -exist`.
func (r ExecRunner) FillIPSets(ctx context.Context, fills []IPSetMemberUpdate) error {
	parsed := make([][]ipsetMember, len(fills))
	for i, f := range fills {
		parsed[i] = make([]ipsetMember, len(f.Add))
		for j, m := range f.Add {
			e, err := parseIPSetMember(f.Type, f.Family, m)
			if err != nil {
				return fmt.Errorf("ipset %s: %w", f.Set, err)
			}
			parsed[i][j] = e
		}
	}
	where := ""
	if r.NetnsPath != "" {
		where = " in network namespace " + r.NetnsPath
	}
	var sock *nl.NetlinkSocket
	open := func() (err error) {
		sock, err = nl.Subscribe(unix.NETLINK_NETFILTER)
		return err
	}
	var err error
	if r.NetnsPath == "" {
		err = open()
	} else {
		err = runInNetns(ctx, r.NetnsPath, open)
	}
	if err != nil {
		return fmt.Errorf("opening a netlink socket for ipsets%s: %w", where, err)
	}
	defer sock.Close()
	tv := unix.NsecToTimeval(ipsetRequestTimeout.Nanoseconds())
	if err := sock.SetReceiveTimeout(&tv); err != nil {
		return fmt.Errorf("setting the netlink socket's timeout: %w", err)
	}
	sockets := map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: sock}}
	for i, f := range fills {
		for from := 0; from < len(parsed[i]); from += fillBatch {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("filling ipset %s%s: %w", f.Set, where, err)
			}
			req := fillRequest(f.Set, f.Type, parsed[i][from:min(from+fillBatch, len(parsed[i]))])
			req.Sockets = sockets
			if err := recoverPanic(func() error { _, err := req.Execute(unix.NETLINK_NETFILTER, 0); return err }); err != nil {
				return fmt.Errorf("filling ipset %s%s (netlink, members %d-%d): %w", f.Set, where, from+1, min(from+fillBatch, len(parsed[i])), err)
			}
		}
	}
	return nil
}

// fillRequest is one IPSET_CMD_ADD of members to set: the protocol
// version, the set's name, a line number (the kernel requires one with a
// list) and the list (IPSET_ATTR_ADT) of entries, each numbered, as
// `ipset restore` sends them.
func fillRequest(set string, typ calc.IPSetType, members []ipsetMember) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(nl.IPSET_CMD_ADD|(unix.NFNL_SUBSYS_IPSET<<8), unix.NLM_F_ACK)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(unix.AF_NETLINK), Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_PROTOCOL, nl.Uint8Attr(nl.IPSET_PROTOCOL)))
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(set)))
	req.AddData(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_LINENO | nl.NLA_F_NET_BYTEORDER, Value: 0})
	list := nl.NewRtAttr(nl.IPSET_ATTR_ADT|int(nl.NLA_F_NESTED), nil)
	for k, e := range members {
		data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|int(nl.NLA_F_NESTED), nil)
		addrType := nl.IPSET_ATTR_IPADDR_IPV6
		if e.addr.Is4() {
			addrType = nl.IPSET_ATTR_IPADDR_IPV4
		}
		addr := nl.NewRtAttr(addrType|int(nl.NLA_F_NET_BYTEORDER), e.addr.AsSlice())
		data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_IP|int(nl.NLA_F_NESTED), addr.Serialize()))
		if typ == calc.HashNet {
			data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_CIDR, nl.Uint8Attr(e.bits)))
		} else {
			data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PROTO, nl.Uint8Attr(e.proto)))
			data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT|int(nl.NLA_F_NET_BYTEORDER), binary.BigEndian.AppendUint16(nil, e.port)))
		}
		data.AddChild(&nl.Uint32Attribute{Type: nl.IPSET_ATTR_LINENO | nl.NLA_F_NET_BYTEORDER, Value: uint32(k + 1)})
		list.AddChild(data)
	}
	req.AddData(list)
	return req
}
