package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// This file is the pure half of the ipset driver: from the desired sets
// and what the kernel holds, planSets decides what to change (setsPlan);
// the plan's encoders give the `ipset restore` script and the in-process
// updates. IPSets (ipsets.go) executes a plan and records its outcome.

// kernelForm is member m of a set of type typ as the kernel holds it
// (and `ipset save` prints it): single-address networks without their
// prefix length, and a /0 network, which hash:net refuses ("The value of
// the CIDR parameter of the IP address is invalid"), as its two /1
// halves, as Calico's felix splits it (labelindex's
// extractCIDRsFromNetworkSet). second is "" unless m is a /0.
func kernelForm(typ string, m string) (first, second string) {
	if typ == string(calc.HashNet) && strings.HasSuffix(m, "/0") {
		if strings.Contains(m, ":") {
			return "::/1", "8000::/1"
		}
		return "0.0.0.0/1", "128.0.0.0/1"
	}
	return normalise(m), ""
}

// zeroOf is the /0 network whose half k (in kernel form) is, or "".
func zeroOf(k string) string {
	switch k {
	case "0.0.0.0/1", "128.0.0.0/1":
		return "0.0.0.0/0"
	case "::/1", "8000::/1":
		return "::/0"
	}
	return ""
}

// listHas says whether the kernel form of member list l (of a set of
// type typ) holds k (in kernel form): l has k as it is, with the prefix
// length normalise takes off, or, for a /1, the /0 it is half of.
func listHas(typ string, l calc.MemberList, k string) bool {
	if l.Has(k) {
		return true
	}
	if typ != string(calc.HashNet) {
		return false
	}
	if z := zeroOf(k); z != "" {
		return l.Has(z)
	}
	if strings.Contains(k, "/") {
		return false
	}
	if strings.Contains(k, ":") {
		return l.Has(k + "/128")
	}
	return l.Has(k + "/32")
}

// setOpKind is how a set is written.
type setOpKind uint8

const (
	// opCreate creates the set and adds its members.
	opCreate setOpKind = iota
	// opPatch deletes and adds members of the set the kernel has.
	opPatch
	// opSwap builds the new content in a temporary set and swaps it in,
	// so that rules see the old or the new members, never a mixture.
	opSwap
	// opRecreate destroys the set and creates it anew (a change of type
	// or family, which cannot be swapped; it fails while a rule still
	// uses the old set).
	opRecreate
)

// setOp is the change of one set.
type setOp struct {
	name string
	want *setState
	kind setOpKind
	// del and add are opPatch's members (kernel form, sorted).
	del, add []string
	// temp is opSwap's scratch set.
	temp string
	// patched says opPatch came from the renderer's member changes
	// alone (no compare of member lists).
	patched bool
}

// setsPlan is what one apply changes in the kernel's sets.
type setsPlan struct {
	// temps are leftover scratch sets of an interrupted apply, destroyed
	// first.
	temps []string
	ops   []setOp
	// same are the sets whose kernel content is the desired one without
	// a write (adopted as written).
	same []string
}

// empty says the plan changes nothing in the kernel.
func (p *setsPlan) empty() bool { return len(p.temps) == 0 && len(p.ops) == 0 }

// onlyMembers says every change is a member add or delete of a set the
// kernel has (what IPSetMembers can write), and how many there are.
func (p *setsPlan) onlyMembers() (bool, int) {
	if len(p.temps) > 0 {
		return false, 0
	}
	n := 0
	for i := range p.ops {
		if p.ops[i].kind != opPatch {
			return false, 0
		}
		n += len(p.ops[i].add) + len(p.ops[i].del)
	}
	return true, n
}

// newMembers is the number of members of the sets the plan creates.
func (p *setsPlan) newMembers() int {
	n := 0
	for i := range p.ops {
		if p.ops[i].kind == opCreate {
			n += p.ops[i].want.count()
		}
	}
	return n
}

// planSets plans the apply that makes the kernel's sets (actual) the
// desired ones; a desired set for which skip says so is left as the
// kernel has it (a failed set whose retry is not due). Stale sets are
// not destroyed here (see IPSets.ApplyDeletions).
func planSets(desired map[string]*setState, actual map[string]*kernelSet, skip func(string, *setState) bool) setsPlan {
	var p setsPlan
	for _, name := range slices.Sorted(maps.Keys(actual)) {
		if isTemp(name) {
			p.temps = append(p.temps, name)
		}
	}
	temps := 0
	for _, name := range slices.Sorted(maps.Keys(desired)) {
		want := desired[name]
		have, ok := actual[name]
		switch {
		case skip(name, want):
		case ok && have.from == want:
			// Written from this very state: nothing to do.
		case !ok:
			p.ops = append(p.ops, setOp{name: name, want: want, kind: opCreate})
		case have.typ != want.typ || have.family != want.family:
			p.ops = append(p.ops, setOp{name: name, want: want, kind: opRecreate})
		case have.from != nil && want.touched != nil && have.from.version == want.since:
			if op := patchOp(name, have.from, want); len(op.add)+len(op.del) > 0 {
				p.ops = append(p.ops, op)
			} else {
				p.same = append(p.same, name)
			}
		default:
			op := compareOp(name, have, want)
			if op.kind == opSwap {
				op.temp = tempName(want.family, temps)
				temps++
			}
			if op.kind == opPatch && len(op.add)+len(op.del) == 0 {
				p.same = append(p.same, name)
				continue
			}
			p.ops = append(p.ops, op)
		}
	}
	return p
}

// patchOp is the change of set name from the state the kernel holds
// (from) to want, which the renderer reached from it by changing the
// members in want.touched: only those are looked at.
func patchOp(name string, from, want *setState) setOp {
	op := setOp{name: name, want: want, kind: opPatch, patched: true}
	keys := make([]string, 0, len(want.touched))
	for _, m := range want.touched {
		a, b := kernelForm(want.typ, m)
		keys = append(keys, a)
		if b != "" {
			keys = append(keys, b)
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		had, has := listHas(from.typ, from.spec, k), listHas(want.typ, want.spec, k)
		switch {
		case has && !had:
			op.add = append(op.add, k)
		case had && !has:
			op.del = append(op.del, k)
		}
	}
	return op
}

// compareOp is the change of set name from the kernel's content (have)
// to want, by comparing their members: added and deleted in place when
// the change is small, else rebuilt and swapped in.
func compareOp(name string, have *kernelSet, want *setState) setOp {
	haveSet, wantSet := have.memberSet(), want.memberSet()
	var add, del []string
	for m := range wantSet {
		if !haveSet[m] {
			add = append(add, m)
		}
	}
	for m := range haveSet {
		if !wantSet[m] {
			del = append(del, m)
		}
	}
	if n := len(add) + len(del); n > 16 && n > len(wantSet)/4 {
		return setOp{name: name, want: want, kind: opSwap}
	}
	slices.Sort(add)
	slices.Sort(del)
	return setOp{name: name, want: want, kind: opPatch, add: add, del: del}
}

// script is the plan as `ipset -exist restore` input. With fill, the sets
// created are created empty (their members are filled in-process
// afterwards, see fills).
func (p *setsPlan) script(fill bool) string {
	var b strings.Builder
	for _, name := range p.temps {
		fmt.Fprintf(&b, "destroy %s\n", name)
	}
	for i := range p.ops {
		p.ops[i].write(&b, fill)
	}
	return b.String()
}

// write writes op as `ipset restore` lines.
func (op *setOp) write(b *strings.Builder, fill bool) {
	spec := rules.IPSetSpec{Type: calc.IPSetType(op.want.typ), Family: op.want.family}
	create := func(name string) { fmt.Fprintf(b, "%s\n", sized(spec.CreateLine(name), op.want.count())) }
	addAll := func(set string) {
		for m := range op.want.kernelMembers() {
			writeMember(b, "add", set, m)
		}
	}
	switch op.kind {
	case opCreate:
		create(op.name)
		if !fill {
			addAll(op.name)
		}
	case opRecreate:
		fmt.Fprintf(b, "destroy %s\n", op.name)
		create(op.name)
		addAll(op.name)
	case opSwap:
		create(op.temp)
		addAll(op.temp)
		fmt.Fprintf(b, "swap %s %s\ndestroy %s\n", op.temp, op.name, op.temp)
	case opPatch:
		for _, m := range op.del {
			writeMember(b, "del", op.name, m)
		}
		for _, m := range op.add {
			writeMember(b, "add", op.name, m)
		}
	}
}

// memberUpdates are the plan's member changes for IPSetMembers (a plan
// of only those; see onlyMembers).
func (p *setsPlan) memberUpdates() []IPSetMemberUpdate {
	out := make([]IPSetMemberUpdate, 0, len(p.ops))
	for i := range p.ops {
		op := &p.ops[i]
		out = append(out, IPSetMemberUpdate{Set: op.name, Type: calc.IPSetType(op.want.typ), Family: op.want.family, Del: op.del, Add: op.add})
	}
	return out
}

// fills are the members of the sets the plan creates, for IPSetFiller.
func (p *setsPlan) fills() []IPSetMemberUpdate {
	var out []IPSetMemberUpdate
	for i := range p.ops {
		op := &p.ops[i]
		if op.kind == opCreate {
			out = append(out, IPSetMemberUpdate{Set: op.name, Type: calc.IPSetType(op.want.typ), Family: op.want.family,
				Add: slices.Collect(op.want.kernelMembers())})
		}
	}
	return out
}
