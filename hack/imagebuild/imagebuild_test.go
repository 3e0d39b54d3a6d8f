package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readSpec(t *testing.T) Spec {
	t.Helper()
	text, err := os.ReadFile("image.conf")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSpec(string(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseSpecRefuses(t *testing.T) {
	good := "suite bookworm\npackage a\nbinary /usr/bin x example.com/x\ncmd /usr/bin/x\n"
	if _, err := ParseSpec(good); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	for name, text := range map[string]string{
		"unknown keyword":  good + "pkg b\n",
		"arity":            good + "package b c\n",
		"duplicate":        good + "package a\n",
		"two suites":       good + "suite trixie\n",
		"relative dir":     good + "binary usr/bin y example.com/y\n",
		"no cmd":           "suite bookworm\npackage a\nbinary /usr/bin x example.com/x\n",
		"no binary":        "suite bookworm\npackage a\ncmd /usr/bin/x\n",
		"duplicate binary": good + "binary /usr/bin/ x example.com/other\n",
	} {
		if _, err := ParseSpec(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDockerfileMatchesConf: the Dockerfile (for people with Docker)
// installs what make image does: the same Debian suite, packages, files
// and command as image.conf.
func TestDockerfileMatchesConf(t *testing.T) {
	s := readSpec(t)
	text, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := parseDockerfile(string(text))
	if want := "debian:" + s.Suite + "-slim"; d.from != want {
		t.Errorf("Dockerfile FROM %q, image.conf's suite gives %q", d.from, want)
	}
	if diff := cmp.Diff(sorted(s.Packages), sorted(d.packages)); diff != "" {
		t.Errorf("Dockerfile's apt-get install packages differ from image.conf's (-conf +Dockerfile):\n%s", diff)
	}
	var want []string
	for _, b := range s.Binaries {
		want = append(want, "bin/"+b.Name+" -> "+b.Path())
	}
	if diff := cmp.Diff(sorted(want), sorted(d.copies)); diff != "" {
		t.Errorf("Dockerfile's COPY lines differ from image.conf's binaries (-conf +Dockerfile):\n%s", diff)
	}
	if d.cmd != `["`+s.Cmd+`"]` {
		t.Errorf("Dockerfile CMD %s, image.conf's cmd %s", d.cmd, s.Cmd)
	}
}

type dockerfile struct {
	from, cmd        string
	packages, copies []string
}

// parseDockerfile reads the few instructions the Tabby Dockerfile uses,
// joining continued lines.
func parseDockerfile(text string) dockerfile {
	var d dockerfile
	joined := strings.ReplaceAll(text, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "FROM":
			d.from = f[1]
		case "CMD":
			d.cmd = strings.Join(f[1:], " ")
		case "COPY":
			dst := f[len(f)-1]
			for _, src := range f[1 : len(f)-1] {
				d.copies = append(d.copies, src+" -> "+strings.TrimSuffix(dst, "/")+"/"+src[strings.LastIndex(src, "/")+1:])
			}
		case "RUN":
			d.packages = append(d.packages, aptInstalled(f)...)
		}
	}
	return d
}

// aptInstalled is what `apt-get install` names in a RUN's words: the
// words after it that are not options, up to the next &&.
func aptInstalled(words []string) []string {
	var out []string
	in := false
	for i, w := range words {
		switch {
		case w == "&&":
			in = false
		case w == "install" && i > 0 && words[i-1] == "apt-get":
			in = true
		case in && !strings.HasPrefix(w, "-"):
			out = append(out, w)
		}
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestParseDependsAndClosure(t *testing.T) {
	out := `a
  PreDepends: init
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: b
  Recommends: r
b
 |Depends: c
  Depends: d
  Depends: libc:any
`
	deps, err := ParseDepends(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]DepGroup{
		"a": {{[]string{"init"}}, {[]string{"debconf", "<debconf-2.0>"}}, {[]string{"b"}}},
		"b": {{[]string{"c", "d"}}, {[]string{"libc"}}},
	}
	if diff := cmp.Diff(want, deps); diff != "" {
		t.Fatalf("ParseDepends (-want +got):\n%s", diff)
	}
	all := map[string][]DepGroup{
		"a": want["a"], "b": want["b"], "c": nil, "libc": {{[]string{"gcc-base"}}}, "gcc-base": nil,
	}
	var asked [][]string
	query := func(names []string) (map[string][]DepGroup, error) {
		asked = append(asked, names)
		out := map[string][]DepGroup{}
		for _, n := range names {
			if g, ok := all[n]; ok {
				out[n] = g
			}
		}
		return out, nil
	}
	got, err := Closure([]string{"a"}, []string{"init", "debconf", "debconf-2.0"}, query)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "gcc-base", "libc"}, got); diff != "" {
		t.Errorf("closure (-want +got):\n%s", diff)
	}
	if len(asked) != 4 {
		t.Errorf("asked apt %d times (%v), want once per level", len(asked), asked)
	}
	if _, err := Closure([]string{"a"}, []string{"init", "debconf"}, query); err == nil || !strings.Contains(err.Error(), "<debconf-2.0>") {
		t.Errorf("an unskipped virtual package: %v", err)
	}
	all["b"] = []DepGroup{{[]string{"missing"}}}
	if _, err := Closure([]string{"a"}, []string{"init", "debconf", "debconf-2.0"}, query); err == nil {
		t.Error("a package apt does not know was accepted")
	}
}

func TestLockRoundTripAndShow(t *testing.T) {
	show := "Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nSHA256: " + strings.Repeat("a", 64) +
		"\nDescription: x\n\nPackage: conntrack\nVersion: 1:1.4.7-1+b2\nArchitecture: amd64\nSHA256: " + strings.Repeat("b", 64) + "\n"
	pins, err := ParseShow(show)
	if err != nil {
		t.Fatal(err)
	}
	l := Lock{Suite: "bookworm", Pins: pins}
	back, err := ParseLock(l.Format())
	if err != nil {
		t.Fatal(err)
	}
	if back.Pins[0].Name != "conntrack" || back.Pins[1].Name != "libc6" || back.Suite != "bookworm" {
		t.Errorf("lock not sorted or lost data: %+v", back)
	}
	if got := back.Pins[0].DebFile(); got != "conntrack_1%3a1.4.7-1+b2_amd64.deb" {
		t.Errorf("DebFile %s", got)
	}
	for name, text := range map[string]string{
		"twice": "suite s\npin a 1 amd64 " + strings.Repeat("a", 64) + "\npin a 2 amd64 " + strings.Repeat("a", 64) + "\n",
		"short": "suite s\npin a 1 amd64 abc\n",
		"empty": "suite s\n",
	} {
		if _, err := ParseLock(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseShow("Package: a\nVersion: 1\n"); err == nil {
		t.Error("a stanza with no hash accepted")
	}
}

// TestTheLockPinsTheConf: debian.lock is for image.conf's suite and pins
// every package image.conf asks for (run -update-lock after editing it).
func TestTheLockPinsTheConf(t *testing.T) {
	s := readSpec(t)
	text, err := os.ReadFile("debian.lock")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLock(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if l.Suite != s.Suite {
		t.Errorf("lock suite %s, conf %s", l.Suite, s.Suite)
	}
	pinned := map[string]bool{}
	for _, p := range l.Pins {
		pinned[p.Name] = true
	}
	for _, p := range s.Packages {
		if !pinned[p] {
			t.Errorf("image.conf's %s is not in debian.lock: run go run ./hack/imagebuild -update-lock", p)
		}
	}
	for _, p := range s.Skip {
		if pinned[p] {
			t.Errorf("image.conf skips %s but debian.lock pins it", p)
		}
	}
}

// debTar builds a tar stream as dpkg-deb --fsys-tarfile gives it.
func debTar(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		data := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			data, h.Linkname, h.Size = []byte("content of "+h.Name), "", int64(len("content of "+h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(data)
		}
	}
	tw.Close()
	return b.Bytes()
}

func TestTreeMergesUsr(t *testing.T) {
	tr := NewTree()
	data := debTar(t,
		&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./sbin/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./sbin/xtables-nft-multi", Typeflag: tar.TypeReg, Mode: 0o755},
		&tar.Header{Name: "./sbin/iptables-nft", Typeflag: tar.TypeSymlink, Linkname: "xtables-nft-multi"},
		&tar.Header{Name: "./lib/x86_64-linux-gnu/libfoo.so.1.2", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "./lib/x86_64-linux-gnu/libfoo.so.1", Typeflag: tar.TypeSymlink, Linkname: "libfoo.so.1.2"},
		&tar.Header{Name: "./lib64/ld.so", Typeflag: tar.TypeSymlink, Linkname: "../lib/x86_64-linux-gnu/libfoo.so.1"},
		&tar.Header{Name: "./bin/ip", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/ip"},
		&tar.Header{Name: "./usr/bin/ip", Typeflag: tar.TypeReg, Mode: 0o755},
		&tar.Header{Name: "./usr/bin/ip2", Typeflag: tar.TypeLink, Linkname: "./usr/bin/ip"},
		&tar.Header{Name: "./usr/share/man/man8/ip.8.gz", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "./usr/share/doc/iproute2/copyright", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "./usr/share/doc/iproute2/changelog.gz", Typeflag: tar.TypeReg, Mode: 0o644},
	)
	if err := tr.AddDebTar(bytes.NewReader(data), KeepPackagePath); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddMergedSymlinks(); err != nil {
		t.Fatal(err)
	}
	want := []string{"bin", "lib", "lib64", "sbin", "usr", "usr/bin", "usr/bin/ip", "usr/bin/ip2",
		"usr/lib", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/libfoo.so.1", "usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
		"usr/lib64", "usr/lib64/ld.so", "usr/sbin", "usr/sbin/iptables-nft", "usr/sbin/xtables-nft-multi",
		"usr/share", "usr/share/doc", "usr/share/doc/iproute2", "usr/share/doc/iproute2/copyright"}
	if diff := cmp.Diff(want, tr.Paths()); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	for from, to := range map[string]string{
		"/sbin/iptables-nft": "usr/sbin/xtables-nft-multi",
		"/lib64/ld.so":       "usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
		"/bin/ip":            "usr/bin/ip",
	} {
		if got, err := tr.Resolve(from); err != nil || got != to {
			t.Errorf("%s resolves to %s, %v; want %s", from, got, err, to)
		}
	}
	if _, err := tr.Resolve("/bin/nothing"); err == nil {
		t.Error("a missing file resolved")
	}
	if err := tr.Add("usr/bin/ip", &Entry{Kind: File, Mode: 0o755, Data: []byte("other")}); err == nil {
		t.Error("a different file replaced an existing one")
	}
	if err := tr.Add("usr/bin/ip", &Entry{Kind: File, Mode: 0o755, Data: []byte("content of ./usr/bin/ip")}); err != nil {
		t.Errorf("the same file again: %v", err)
	}
}

func TestTarIsDeterministic(t *testing.T) {
	build := func(order []string) []byte {
		tr := NewTree()
		for _, p := range order {
			if err := tr.Add(p, &Entry{Kind: File, Mode: 0o755, Data: []byte(p)}); err != nil {
				t.Fatal(err)
			}
		}
		tr.Add("var/run", &Entry{Kind: Symlink, Mode: 0o777, Link: "/run"})
		b, err := tr.Tar(time.Unix(1700000000, 0))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := build([]string{"usr/bin/b", "usr/bin/a", "opt/cni/bin/calico"})
	b := build([]string{"opt/cni/bin/calico", "usr/bin/a", "usr/bin/b"})
	if !bytes.Equal(a, b) {
		t.Fatal("the same tree added in another order gave other bytes")
	}
	r := tar.NewReader(bytes.NewReader(a))
	var names []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: owner %d:%d %q, time %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		names = append(names, h.Name)
	}
	want := []string{"opt/", "opt/cni/", "opt/cni/bin/", "opt/cni/bin/calico", "usr/", "usr/bin/", "usr/bin/a", "usr/bin/b", "var/", "var/run"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// TestCheckELF: a dynamically linked program (the host's own true) is
// reported until its loader and libraries are in the tree.
func TestCheckELF(t *testing.T) {
	prog, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTree()
	if err := tr.Add("usr/bin/true", &Entry{Kind: File, Mode: 0o755, Data: prog}); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddMergedSymlinks(); err != nil {
		t.Fatal(err)
	}
	problems := CheckELF(tr)
	if len(problems) != 2 || !strings.Contains(strings.Join(problems, "\n"), "libc.so.6") {
		t.Fatalf("want the interpreter and libc.so.6 missing, got %q", problems)
	}
	tr.Add("usr/lib/x86_64-linux-gnu/libc.so.6", &Entry{Kind: File, Mode: 0o644, Data: []byte("not checked: no ELF magic")})
	tr.Add("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", &Entry{Kind: File, Mode: 0o755, Data: []byte("x")})
	tr.Add("usr/lib64/ld-linux-x86-64.so.2", &Entry{Kind: Symlink, Mode: 0o777, Link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"})
	if problems := CheckELF(tr); len(problems) != 0 {
		t.Errorf("all there, still: %q", problems)
	}
}

func TestAddBase(t *testing.T) {
	nft := func(certs bool) *Tree {
		tr := NewTree()
		for _, p := range []string{"iptables", "ip6tables"} {
			for _, s := range []string{"", "-save", "-restore"} {
				tr.Add("usr/sbin/"+p+"-nft"+s, &Entry{Kind: Symlink, Mode: 0o777, Link: "xtables-nft-multi"})
			}
		}
		tr.Add("usr/sbin/xtables-nft-multi", &Entry{Kind: File, Mode: 0o755, Data: []byte("x")})
		if certs {
			tr.Add("usr/share/ca-certificates/mozilla/B.crt", &Entry{Kind: File, Mode: 0o644, Data: []byte("B\n")})
			tr.Add("usr/share/ca-certificates/mozilla/A.crt", &Entry{Kind: File, Mode: 0o644, Data: []byte("A")})
		}
		return tr
	}
	if err := AddBase(nft(false)); err == nil {
		t.Error("no certificates, yet a base")
	}
	tr := nft(true)
	if err := AddBase(tr); err != nil {
		t.Fatal(err)
	}
	if e, _ := tr.Get("etc/ssl/certs/ca-certificates.crt"); e == nil || string(e.Data) != "A\nB\n" {
		t.Errorf("CA bundle %+v", e)
	}
	if got, err := tr.Resolve("/sbin/iptables-restore"); err != nil || got != "usr/sbin/xtables-nft-multi" {
		t.Errorf("iptables-restore -> %s, %v", got, err)
	}
}

func TestVersionAndEpoch(t *testing.T) {
	for v, ok := range map[string]bool{"v0.9.0": true, "v1.2.3-rc.1": true, "0.9.0": false, "latest": false, "v1.2": false, "v1.2.x": false} {
		if validVersion(v) != ok {
			t.Errorf("validVersion(%q) = %v", v, !ok)
		}
	}
	if e, err := sourceDateEpoch(""); err != nil || e.Unix() != 0 {
		t.Errorf("unset: %v %v", e, err)
	}
	if e, err := sourceDateEpoch("1764900000"); err != nil || e.Unix() != 1764900000 {
		t.Errorf("set: %v %v", e, err)
	}
	if _, err := sourceDateEpoch("yesterday"); err == nil {
		t.Error("a bad SOURCE_DATE_EPOCH accepted")
	}
}
