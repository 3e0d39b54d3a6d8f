package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// agnhostTools make the cluster's agnhost image hold what upstream's does
// (test/images/agnhost/Dockerfile: Alpine, whose busybox gives sh, wget,
// seq, hostname..., with curl, netcat-openbsd and bash added), for the
// commands the e2e specs run in it through `kubectl exec` (`nc -v -t -w 2`,
// `curl -g -q -s`, `wget -q -O -`) and the network-policy-api pods'
// `/bin/bash -c`. This machine's programs (hack/install-packages.sh:
// busybox-static, netcat-openbsd, curl), each with the libraries it loads.
// /bin/sh is dash: Debian's static busybox is built to run its own applets
// before looking at PATH (its sh ran its nc, not netcat-openbsd's), which
// Alpine's is not.
var agnhostTools = []program{
	{"/bin/sh", "/usr/bin/dash"}, {"/bin/busybox", "/bin/busybox"}, {"/bin/bash", "/bin/bash"},
	{"/usr/bin/nc", "/usr/bin/nc.openbsd"}, {"/usr/bin/curl", "/usr/bin/curl"},
}

// writeSupportImages writes the pause and agnhost image tarballs (and,
// with the cluster DNS, CoreDNS's) into the state folder and returns their
// paths. Each is also tagged with the names the upstream e2e tests ask for
// (e2e.go), so they run without a registry. agnhost runs `pause` unless
// told otherwise and holds agnhostTools and porter's TLS certificate and
// key; with dns also what the DNS e2e's probers run (dnsTools) and
// /coredns, as upstream's.
func (c *Cluster) writeSupportImages(dns bool) ([]string, error) {
	dir := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pause, agn := filepath.Join(dir, "pause.tar"), filepath.Join(dir, "agnhost.tar")
	if err := writeImage(pause, []string{pauseImage, e2ePauseImage}, []imageFile{{path: "pause", src: filepath.Join(c.Bin, "tabby-pause"), mode: 0o755}}, []string{"/pause"}, nil); err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	files, refs, err := c.agnhostFiles(dns)
	if err != nil {
		return nil, fmt.Errorf("agnhost image: %w", err)
	}
	if err := writeImage(agn, refs, files, []string{"/agnhost"}, []string{"pause"}); err != nil {
		return nil, fmt.Errorf("agnhost image: %w", err)
	}
	if !dns {
		return []string{pause, agn}, nil
	}
	coredns := filepath.Join(dir, "coredns.tar")
	if err := writeImage(coredns, []string{CoreDNSImage}, []imageFile{{path: "coredns", src: filepath.Join(c.KubeBin, "coredns"), mode: 0o755}}, []string{"/coredns"}, nil); err != nil {
		return nil, fmt.Errorf("coredns image: %w", err)
	}
	return []string{pause, agn, coredns}, nil
}

// agnhostFiles are the agnhost image's files and names.
func (c *Cluster) agnhostFiles(dns bool) ([]imageFile, []string, error) {
	progs := agnhostTools
	refs := []string{AgnhostImage, E2EAgnhostImage, CNPAgnhostImage, e2eNginxImage}
	files := []imageFile{{path: "tmp", mode: 0o1777}, {path: "agnhost", src: filepath.Join(c.KubeBin, "agnhost"), mode: 0o755}}
	// porter's TLS ports read these from its working folder, /.
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		files = append(files, imageFile{path: f, src: filepath.Join(c.KubeBin, "agnhost-porter", f), mode: 0o644})
	}
	if dns {
		progs = append(append([]program{}, progs...), dnsTools...)
		refs = append(refs, e2eGlibcDNSImage)
		files = append(files, imageFile{path: "coredns", src: filepath.Join(c.KubeBin, "coredns"), mode: 0o755},
			imageFile{path: "etc", mode: 0o755}, imageFile{path: "etc/nsswitch.conf", data: nsswitchConf, mode: 0o644})
	}
	tools, err := programFiles(progs)
	if err != nil {
		return nil, nil, err
	}
	applets, err := busyboxLinks("/bin/busybox", tools)
	if err != nil {
		return nil, nil, err
	}
	return append(append(files, tools...), applets...), refs, nil
}

// busyboxLinks are /bin/<applet> -> busybox for each applet of the
// busybox at path, but for the paths files already hold.
func busyboxLinks(path string, files []imageFile) ([]imageFile, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f.path] = true
	}
	var links []imageFile
	for _, a := range strings.Fields(string(out)) {
		if p := "bin/" + a; !have[p] && !strings.Contains(a, "/") {
			have[p] = true
			links = append(links, imageFile{path: p, link: "busybox", mode: 0o777})
		}
	}
	return links, nil
}

// program is a program of this machine (src) and where an image holds it.
type program struct{ at, src string }

// programFiles are programs of this machine, each at its path in the
// image, and the libraries they load (as ldd lists them; none for a
// static one) at their own paths, with the folders holding them, each
// once.
func programFiles(progs []program) ([]imageFile, error) {
	var files []imageFile
	seen := map[string]bool{}
	add := func(at, src string) {
		if seen[at] {
			return
		}
		seen[at] = true
		var parents []imageFile
		for d := filepath.Dir(at); d != "/" && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			parents = append([]imageFile{{path: d[1:], mode: 0o755}}, parents...)
		}
		files = append(append(files, parents...), imageFile{path: at[1:], src: src, mode: 0o755})
	}
	for _, p := range progs {
		out, err := exec.Command("ldd", p.src).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "not a dynamic executable") {
			return nil, fmt.Errorf("ldd %s: %w: %s", p.src, err, strings.TrimSpace(string(out)))
		}
		add(p.at, p.src)
		for _, lib := range lddPaths(string(out)) {
			add(lib, lib)
		}
	}
	return files, nil
}
