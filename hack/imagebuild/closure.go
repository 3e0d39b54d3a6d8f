package main

import (
	"fmt"
	"sort"
	"strings"
)

// DepGroup is one dependency of a package: any one of Alternatives
// satisfies it. A name in angle brackets ("<debconf-2.0>") is a virtual
// package.
type DepGroup struct {
	Alternatives []string
}

// ParseDepends reads `apt-cache depends --no-recommends ...` output for
// several packages: per package, its Depends and PreDepends groups.
// "|Depends: a" joins a to the next line's group; the indented provider
// lines under a virtual package are ignored (a virtual package must be
// skipped by name or the closure fails).
func ParseDepends(out string) (map[string][]DepGroup, error) {
	deps := map[string][]DepGroup{}
	cur := ""
	var pending []string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			if len(pending) > 0 {
				return nil, fmt.Errorf("apt-cache depends: %s ends inside an alternative", cur)
			}
			cur = strings.TrimSpace(line)
			deps[cur] = deps[cur][:0:0]
			continue
		}
		if strings.HasPrefix(line, "    ") {
			continue // a provider of the virtual package above
		}
		t := strings.TrimSpace(line)
		alt := strings.HasPrefix(t, "|")
		kind, name, ok := strings.Cut(strings.TrimPrefix(t, "|"), ": ")
		if !ok || cur == "" {
			return nil, fmt.Errorf("apt-cache depends: cannot read %q", line)
		}
		if kind != "Depends" && kind != "PreDepends" {
			continue
		}
		pending = append(pending, strings.TrimSuffix(name, ":any"))
		if alt {
			continue
		}
		deps[cur] = append(deps[cur], DepGroup{Alternatives: pending})
		pending = nil
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("apt-cache depends: %s ends inside an alternative", cur)
	}
	return deps, nil
}

// Closure is every package the roots need, following Depends and
// PreDepends, minus skipped names (and what only they need). query
// returns the dependency groups of the packages asked (it is called once
// per round with the newly found names). Within a group the first
// alternative not skipped is taken; a group whose alternatives are all
// skipped is dropped; a virtual package not skipped is an error (name a
// real provider in image.conf or skip it). The result is sorted.
func Closure(roots, skip []string, query func([]string) (map[string][]DepGroup, error)) ([]string, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
		skipped["<"+s+">"] = true
	}
	have := map[string]bool{}
	next := append([]string(nil), roots...)
	for len(next) > 0 {
		for _, n := range next {
			have[n] = true
		}
		deps, err := query(next)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, n := range next {
			groups, ok := deps[n]
			if !ok {
				return nil, fmt.Errorf("apt-cache knows no package %q", n)
			}
			for _, g := range groups {
				pick, err := choose(n, g, skipped)
				if err != nil {
					return nil, err
				}
				if pick != "" && !have[pick] {
					have[pick] = true
					found = append(found, pick)
				}
			}
		}
		next = found
	}
	out := make([]string, 0, len(have))
	for n := range have {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func choose(pkg string, g DepGroup, skipped map[string]bool) (string, error) {
	for _, a := range g.Alternatives {
		if skipped[a] {
			continue
		}
		if strings.HasPrefix(a, "<") {
			return "", fmt.Errorf("%s depends on virtual package %s: skip it or add a provider as a package in image.conf", pkg, a)
		}
		return a, nil
	}
	return "", nil
}
