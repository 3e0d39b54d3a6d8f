package main

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// AddBase adds what a Debian system's base packages and maintainer
// scripts would have made and the programs expect: merged-/usr
// symlinks, root's passwd/group entries, /tmp, /run (and /var/run), the
// CA bundle update-ca-certificates builds, and the iptables alternatives
// Debian selects by default (the nft backend, priority 20 over legacy's
// 10). It runs after the packages are added.
func AddBase(t *Tree) error {
	if err := t.AddMergedSymlinks(); err != nil {
		return err
	}
	adds := []struct {
		p string
		e *Entry
	}{
		{"etc/passwd", &Entry{Kind: File, Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/usr/sbin/nologin\n")}},
		{"etc/group", &Entry{Kind: File, Mode: 0o644, Data: []byte("root:x:0:\n")}},
		{"tmp", &Entry{Kind: Dir, Mode: 0o1777}},
		{"root", &Entry{Kind: Dir, Mode: 0o700}},
		{"run", &Entry{Kind: Dir, Mode: 0o755}},
		{"var/run", &Entry{Kind: Symlink, Mode: 0o777, Link: "/run"}},
		{"var/log", &Entry{Kind: Dir, Mode: 0o755}},
	}
	for _, a := range adds {
		if err := t.Add(a.p, a.e); err != nil {
			return err
		}
	}
	if err := addCABundle(t); err != nil {
		return err
	}
	return addAlternatives(t)
}

// addCABundle writes /etc/ssl/certs/ca-certificates.crt as
// update-ca-certificates does: every certificate under
// /usr/share/ca-certificates, in path order.
func addCABundle(t *Tree) error {
	var certs []string
	for _, p := range t.Paths() {
		if strings.HasPrefix(p, "usr/share/ca-certificates/") && strings.HasSuffix(p, ".crt") {
			certs = append(certs, p)
		}
	}
	if len(certs) == 0 {
		return fmt.Errorf("no certificates under /usr/share/ca-certificates: is ca-certificates in image.conf?")
	}
	sort.Strings(certs)
	var b strings.Builder
	for _, c := range certs {
		e, _ := t.Get(c)
		b.Write(e.Data)
		if !strings.HasSuffix(string(e.Data), "\n") {
			b.WriteString("\n")
		}
	}
	return t.Add("etc/ssl/certs/ca-certificates.crt", &Entry{Kind: File, Mode: 0o644, Data: []byte(b.String())})
}

// addAlternatives links iptables, ip6tables and their -save/-restore to
// the nft backend, as Debian's alternatives do on a fresh install.
func addAlternatives(t *Tree) error {
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			link := path.Join("usr/sbin", fam+suffix)
			target := fam + "-nft" + suffix
			if _, err := t.Resolve(path.Join("usr/sbin", target)); err != nil {
				return fmt.Errorf("alternative %s: %w", link, err)
			}
			if err := t.Add(link, &Entry{Kind: Symlink, Mode: 0o777, Link: target}); err != nil {
				return err
			}
		}
	}
	return nil
}
