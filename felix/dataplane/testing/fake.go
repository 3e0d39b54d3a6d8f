// Package testing holds a fake kernel for the dataplane drivers: a Runner
// that understands the iptables-save/-restore and ipset save/restore
// commands the drivers send, keeps tables and sets in memory, applies a
// restore transactionally (all or nothing, like the real binaries) and can
// be told to fail.
package testing

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Kernel is the fake. The zero value is not usable; call NewKernel.
type Kernel struct {
	mu     sync.Mutex
	tables map[string]*table // by tableKey: "4/filter", "6/raw", ...
	sets   map[string]*set
	fail   map[string]int // command name -> failures to inject
	calls  []string
	pinned map[string]bool // sets that cannot be destroyed (in use)
	addrs  map[string][]string
	// brokenSets are the sets no write to which succeeds (BreakSet);
	// brokenRules the rule texts no restore may add (BreakRule).
	brokenSets, brokenRules map[string]bool
}

// BreakSet makes every ipset restore that names set fail (broken=false
// mends it), as a set the kernel refuses would.
func (k *Kernel) BreakSet(set string, broken bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.brokenSets[set] = broken
}

// BreakRule makes every iptables-restore that adds a rule containing
// text fail (broken=false mends it), as a rule the kernel refuses would.
func (k *Kernel) BreakRule(text string, broken bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.brokenRules[text] = broken
}

// SetInterfaceAddrs sets the interfaces and addresses (CIDRs) that
// `ip -o addr show` reports.
func (k *Kernel) SetInterfaceAddrs(addrs map[string][]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addrs = maps.Clone(addrs)
}

func (k *Kernel) ipAddrShow() []byte {
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(k.addrs)) {
		for _, a := range k.addrs[name] {
			fam := "inet"
			if strings.Contains(a, ":") {
				fam = "inet6"
			}
			fmt.Fprintf(&b, "%d: %s    %s %s scope global %s\\       valid_lft forever preferred_lft forever\n", i+1, name, fam, a, name)
		}
	}
	return []byte(b.String())
}

// PinSet makes destroying set name fail, as if a rule felix does not own
// used it; unpin with pinned=false.
func (k *Kernel) PinSet(name string, pinned bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pinned[name] = pinned
}

type table struct {
	name   string
	chains map[string][]string
}

// baseChains are each table's kernel chains.
var baseChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"raw":    {"PREROUTING", "OUTPUT"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

func tableKey(version, name string) string { return version + "/" + name }

// tableFor returns the table (created with its base chains on first use).
func (k *Kernel) tableFor(version, name string) *table {
	key := tableKey(version, name)
	if t, ok := k.tables[key]; ok {
		return t
	}
	t := &table{name: name, chains: map[string][]string{}}
	for _, b := range baseChains[name] {
		t.chains[b] = []string{}
	}
	k.tables[key] = t
	return t
}

type set struct {
	typ, family string
	members     map[string]bool
}

// NewKernel returns a fake with empty filter, raw and mangle tables (only
// their base chains) for both IP versions.
func NewKernel() *Kernel {
	return &Kernel{tables: map[string]*table{}, sets: map[string]*set{}, fail: map[string]int{}, pinned: map[string]bool{},
		brokenSets: map[string]bool{}, brokenRules: map[string]bool{}}
}

// FailNext makes the next n runs of command name (e.g. "iptables-restore",
// "ipset") fail.
func (k *Kernel) FailNext(name string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail[name] += n
}

// Calls returns the commands run so far ("iptables-restore", "ipset save", ...).
func (k *Kernel) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// Count returns how many of the calls so far start with prefix.
func (k *Kernel) Count(prefix string) int {
	n := 0
	for _, c := range k.Calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// Rules returns the rule specs of chain in the v4 or v6 filter table, nil
// if it does not exist.
func (k *Kernel) Rules(version int, chain string) []string {
	return k.TableRules(version, "filter", chain)
}

// TableRules is Rules for any table.
func (k *Kernel) TableRules(version int, table, chain string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.tableFor(strconv.Itoa(version), table).chains[chain])
}

// Chains lists the chains of the filter table.
func (k *Kernel) Chains(version int) []string { return k.TableChains(version, "filter") }

// TableChains lists the chains of any table.
func (k *Kernel) TableChains(version int, table string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Sorted(maps.Keys(k.tableFor(strconv.Itoa(version), table).chains))
}

// SetTableRules replaces a chain's rules in any table (creating it).
func (k *Kernel) SetTableRules(version int, table, chain string, rules []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tableFor(strconv.Itoa(version), table).chains[chain] = slices.Clone(rules)
}

// SetRules replaces a filter chain's rules (creating it), as someone else
// would.
func (k *Kernel) SetRules(version int, chain string, rules []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tableFor(strconv.Itoa(version), "filter").chains[chain] = slices.Clone(rules)
}

// Members returns a set's members, sorted; nil if it does not exist.
func (k *Kernel) Members(name string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sets[name]
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.members))
}

// Sets lists the set names.
func (k *Kernel) Sets() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Sorted(maps.Keys(k.sets))
}

// DelMember removes a member behind the driver's back.
func (k *Kernel) DelMember(name, member string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.sets[name].members, member)
}

// Run implements dataplane.Runner.
func (k *Kernel) Run(_ context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	call := strings.TrimSpace(name + " " + strings.Join(args, " "))
	k.calls = append(k.calls, call)
	if k.fail[name] > 0 {
		k.fail[name]--
		return nil, fmt.Errorf("%s: injected failure", name)
	}
	version := "4"
	if strings.HasPrefix(name, "ip6") {
		version = "6"
	}
	switch {
	case strings.HasSuffix(name, "tables-save"):
		tname := "filter"
		if i := slices.Index(args, "-t"); i >= 0 && i+1 < len(args) {
			tname = args[i+1]
		}
		return k.save(k.tableFor(version, tname)), nil
	case strings.HasSuffix(name, "tables-restore"):
		tname, _, _ := strings.Cut(strings.TrimPrefix(string(stdin), "*"), "\n")
		if _, ok := baseChains[tname]; !ok || !strings.HasPrefix(string(stdin), "*") {
			return nil, fmt.Errorf("fake iptables-restore: unsupported table line %q", tname)
		}
		if err := k.checkRestore(string(stdin)); err != nil {
			return nil, err
		}
		t, err := restore(k.tableFor(version, tname), string(stdin))
		if err != nil {
			return nil, err
		}
		k.tables[tableKey(version, tname)] = t
		return nil, nil
	case name == "ip" && slices.Equal(args, []string{"-o", "addr", "show"}):
		return k.ipAddrShow(), nil
	case name == "ipset" && len(args) > 0 && args[0] == "save":
		return k.ipsetSave(), nil
	case name == "ipset" && slices.Contains(args, "restore"):
		return nil, k.ipsetRestore(string(stdin))
	case name == "ipset" && len(args) == 2 && args[0] == "destroy":
		return nil, k.ipsetRestore("destroy " + args[1])
	}
	return nil, fmt.Errorf("fake kernel: unsupported command %q", call)
}

// checkRestore fails an iptables-restore that adds a broken rule or
// matches a set that does not exist (as the kernel refuses it).
func (k *Kernel) checkRestore(text string) error {
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		for b, broken := range k.brokenRules {
			if broken && len(f) > 1 && (f[0] == "-A" || f[0] == "-I") && strings.Contains(l, b) {
				return fmt.Errorf("fake iptables-restore: %q: injected failure", l)
			}
		}
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "--match-set" && k.sets[f[i+1]] == nil {
				return fmt.Errorf("fake iptables-restore: %q: Set %s doesn't exist", l, f[i+1])
			}
		}
	}
	return nil
}

func (k *Kernel) save(t *table) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", t.name)
	names := slices.Sorted(maps.Keys(t.chains))
	for _, n := range names {
		pol := "-"
		if slices.Contains(baseChains[t.name], n) {
			pol = "ACCEPT"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", n, pol)
	}
	for _, n := range names {
		for _, r := range t.chains[n] {
			fmt.Fprintf(&b, "-A %s %s\n", n, r)
		}
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}

func target(spec string) string {
	f := strings.Fields(spec)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

func isBuiltinTarget(s string) bool {
	return s == "" || s == "ACCEPT" || s == "DROP" || s == "RETURN" || s == "MARK" || s == "LOG" || s == "REJECT" || s == "NOTRACK" || s == "CT" ||
		s == "MASQUERADE" || s == "SNAT"
}

// restore applies a --noflush transaction to a copy and returns it, or an
// error if any line is invalid (the table is then unchanged).
func restore(in *table, text string) (*table, error) {
	t := &table{name: in.name, chains: map[string][]string{}}
	for n, r := range in.chains {
		t.chains[n] = slices.Clone(r)
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	committed := false
	for sc.Scan() {
		line++
		l := sc.Text()
		fail := func(format string, args ...any) error {
			return fmt.Errorf("fake iptables-restore: line %d %q: %s", line, l, fmt.Sprintf(format, args...))
		}
		switch {
		case l == "" || strings.HasPrefix(l, "#") || l == "*"+in.name:
		case l == "COMMIT":
			committed = true
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			t.chains[name] = []string{}
		case strings.HasPrefix(l, "-A "), strings.HasPrefix(l, "-I "):
			f := strings.SplitN(l, " ", 3)
			chain, spec := f[1], f[2]
			pos := -1
			if f[0] == "-I" {
				p, rest, _ := strings.Cut(spec, " ")
				n, err := strconv.Atoi(p)
				if err != nil {
					return nil, fail("bad position")
				}
				pos, spec = n-1, rest
			}
			rules, ok := t.chains[chain]
			if !ok {
				return nil, fail("no chain %s", chain)
			}
			if tg := target(spec); !isBuiltinTarget(tg) {
				if _, ok := t.chains[tg]; !ok {
					return nil, fail("no target chain %s", tg)
				}
			}
			if pos < 0 {
				t.chains[chain] = append(rules, spec)
			} else if pos <= len(rules) {
				t.chains[chain] = slices.Insert(rules, pos, spec)
			} else {
				return nil, fail("index out of range")
			}
		case strings.HasPrefix(l, "-D "):
			f := strings.Fields(l)
			n, err := strconv.Atoi(f[2])
			if err != nil || n < 1 || n > len(t.chains[f[1]]) {
				return nil, fail("bad rule number")
			}
			t.chains[f[1]] = slices.Delete(t.chains[f[1]], n-1, n)
		case strings.HasPrefix(l, "-X "):
			name := strings.TrimSpace(l[3:])
			if len(t.chains[name]) > 0 {
				return nil, fail("chain not empty")
			}
			for other, rules := range t.chains {
				for _, r := range rules {
					if target(r) == name {
						return nil, fail("chain referenced from %s", other)
					}
				}
			}
			delete(t.chains, name)
		default:
			return nil, fail("unsupported line")
		}
	}
	if !committed {
		return nil, fmt.Errorf("fake iptables-restore: no COMMIT")
	}
	return t, nil
}

func (k *Kernel) ipsetSave() []byte {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(k.sets)) {
		s := k.sets[n]
		fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem 1048576\n", n, s.typ, s.family)
		for _, m := range slices.Sorted(maps.Keys(s.members)) {
			fmt.Fprintf(&b, "add %s %s\n", n, m)
		}
	}
	return []byte(b.String())
}

func normalise(m string) string {
	// Like the kernel, which keeps a port's protocol as a number that
	// ipset save prints by name.
	for num, name := range map[string]string{"6": "tcp", "17": "udp", "132": "sctp", "136": "udplite"} {
		if ip, port, ok := strings.Cut(m, ","+num+":"); ok {
			return ip + "," + name + ":" + port
		}
	}
	if s, ok := strings.CutSuffix(m, "/32"); ok && !strings.Contains(s, ":") {
		return s
	}
	if s, ok := strings.CutSuffix(m, "/128"); ok && strings.Contains(s, ":") {
		return s
	}
	return m
}

// ipsetRestore applies lines in order (like ipset, not transactional) in
// -exist mode.
func (k *Kernel) ipsetRestore(text string) error {
	for i, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		fail := func(msg string) error { return fmt.Errorf("fake ipset restore: line %d %q: %s", i+1, l, msg) }
		if k.brokenSets[f[1]] || (len(f) > 2 && k.brokenSets[f[2]] && f[0] == "swap") {
			return fail("injected failure")
		}
		s := k.sets[f[1]]
		switch f[0] {
		case "create":
			if s == nil {
				fam := "inet"
				if j := slices.Index(f, "family"); j >= 0 && j+1 < len(f) {
					fam = f[j+1]
				}
				k.sets[f[1]] = &set{typ: f[2], family: fam, members: map[string]bool{}}
			}
		case "add", "del":
			if s == nil {
				return fail("no such set")
			}
			if s.typ == "hash:net" && strings.HasSuffix(f[2], "/0") {
				// As the kernel: hash:net holds no /0.
				return fail("The value of the CIDR parameter of the IP address is invalid")
			}
			if f[0] == "add" {
				s.members[normalise(f[2])] = true
			} else {
				delete(s.members, normalise(f[2]))
			}
		case "swap":
			o := k.sets[f[2]]
			if s == nil || o == nil {
				return fail("no such set")
			}
			k.sets[f[1]], k.sets[f[2]] = o, s
		case "destroy":
			if s == nil {
				return fail("no such set")
			}
			if k.pinned[f[1]] {
				return fail("set is in use")
			}
			delete(k.sets, f[1])
		default:
			return fail("unsupported")
		}
	}
	return nil
}
