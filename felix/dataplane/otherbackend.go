package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
)

// OtherBackends are the iptables backends other than inUse (nft when
// legacy is used and the reverse, for both IP versions). None when inUse
// is the system default binaries, whose variant is unknown.
func OtherBackends(inUse Backend) []Backend {
	switch inUse {
	case BackendNFTV4:
		return []Backend{BackendLegacyV4, BackendLegacyV6}
	case BackendLegacyV4:
		return []Backend{BackendNFTV4, BackendNFTV6}
	}
	return nil
}

// CleanupBackend removes every felix (cali-) chain of b, and every rule of
// other chains that jumps to one or carries felix's cali: comment, from
// the raw, mangle, filter and nat tables, as Calico's felix cleans the
// iptables backend it does not use (stale rules there would still act on
// packets). Chains and rules of others are kept. It returns how many
// chains and rules it removed; a backend whose tools are missing or
// whose tables are empty is nothing to clean.
func CleanupBackend(ctx context.Context, run Runner, b Backend) (chains, rules int, err error) {
	for _, table := range []string{"raw", "mangle", "filter", "nat"} {
		out, err := run.Run(ctx, b.Save, []string{"-t", table}, nil)
		if err != nil {
			continue // the tool or the table is absent
		}
		tx, c, r := cleanupRestore(table, out)
		if c+r == 0 {
			continue
		}
		if _, err := run.Run(ctx, b.Restore, []string{"--noflush"}, []byte(tx)); err != nil {
			return chains, rules, fmt.Errorf("removing felix's rules from %s table %s: %w", b.Restore, table, err)
		}
		chains += c
		rules += r
	}
	return chains, rules, nil
}

// HasFelixRules says whether any of backends holds anything that looks
// like felix's (a cali- chain or a cali: comment), with one save per
// backend (CleanupBackend reads each table on its own). A false positive
// only means a cleanup that finds nothing.
func HasFelixRules(ctx context.Context, run Runner, backends []Backend) bool {
	for _, b := range backends {
		out, err := run.Run(ctx, b.Save, nil, nil)
		if err != nil {
			continue // the tool or its tables are absent
		}
		if bytes.Contains(out, []byte("cali-")) || bytes.Contains(out, []byte("cali:")) {
			return true
		}
	}
	return false
}

// cleanupRestore is the iptables-restore input removing felix's chains
// and hook rules from one table's iptables-save output.
func cleanupRestore(table string, save []byte) (tx string, chains, rules int) {
	var decl, dels, flushes strings.Builder
	var cali []string
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":cali-"):
			name, _, _ := strings.Cut(line[1:], " ")
			cali = append(cali, name)
		case strings.HasPrefix(line, "-A "):
			chain, rest, _ := strings.Cut(line[3:], " ")
			if strings.HasPrefix(chain, "cali-") {
				continue // goes with its chain
			}
			if strings.Contains(rest, " cali-") || strings.Contains(rest, `"cali:`) || strings.Contains(rest, " cali:") {
				fmt.Fprintf(&dels, "-D %s %s\n", chain, rest)
				rules++
			}
		}
	}
	for _, c := range cali {
		fmt.Fprintf(&decl, ":%s - [0:0]\n", c) // declaring flushes it
		fmt.Fprintf(&flushes, "-X %s\n", c)
	}
	if len(cali)+rules == 0 {
		return "", 0, 0
	}
	return "*" + table + "\n" + decl.String() + dels.String() + flushes.String() + "COMMIT\n", len(cali), rules
}
