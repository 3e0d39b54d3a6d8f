package cluster

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The images every node gets besides Tabby's: the pod sandbox (the
// project's own tabby-pause, under the name containerd's sandbox_image
// gives) and agnhost, upstream's e2e test program, for test pods.
const (
	pauseImage   = "registry.k8s.io/pause:3.10"
	AgnhostImage = "docker.io/tabbynet/agnhost:test"
)

// imageFile is one file of a single-layer image.
type imageFile struct {
	path string // inside the image, without the leading /
	src  string // on this machine; "" for a folder (or data's file)
	data string // the file's content, when src is ""
	mode int64
}

// writeImage writes a one-layer image as a docker-archive tarball (what
// `ctr images import` and `docker load` take): the layer, its config and
// manifest.json, every time stamp zero so the same files give the same
// image.
func writeImage(out string, refs []string, files []imageFile, entrypoint, cmd []string) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": map[string]any{"Entrypoint": entrypoint, "Cmd": cmd, "Env": []string{"PATH=/:/usr/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": refs, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// layerTar is the tar of files, in memory.
func layerTar(files []imageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, fe := range files {
		h := &tar.Header{Name: fe.path, Mode: fe.mode, ModTime: time.Unix(0, 0)}
		if fe.src == "" && fe.data != "" {
			h.Size = int64(len(fe.data))
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := io.WriteString(tw, fe.data); err != nil {
				return nil, err
			}
			continue
		}
		if fe.src == "" {
			h.Typeflag, h.Name = tar.TypeDir, fe.path+"/"
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		if err := addFile(tw, h, fe.src); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, bufio.NewReader(f))
	return err
}

// writeSupportImages writes the pause and agnhost image tarballs (and,
// with the cluster DNS, CoreDNS's) into the state folder and returns their
// paths. Each is also tagged with the names the upstream e2e tests ask for
// (e2e.go), so they run without a registry. agnhost runs `pause` unless
// told otherwise and holds /bin/bash (this machine's, with the libraries
// it loads) as upstream's image does: the network-policy-api conformance
// pods start their servers with `/bin/bash -c` and their clients with no
// command. With dns it also holds what the DNS e2e's probers run (dnsTools).
func (c *Cluster) writeSupportImages(dns bool) ([]string, error) {
	dir := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pause, agn := filepath.Join(dir, "pause.tar"), filepath.Join(dir, "agnhost.tar")
	if err := writeImage(pause, []string{pauseImage, e2ePauseImage}, []imageFile{{path: "pause", src: filepath.Join(c.Bin, "tabby-pause"), mode: 0o755}}, []string{"/pause"}, nil); err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	progs := []program{{"/bin/bash", "/bin/bash"}}
	refs := []string{AgnhostImage, E2EAgnhostImage, CNPAgnhostImage, e2eNginxImage}
	files := []imageFile{{path: "tmp", mode: 0o1777}, {path: "agnhost", src: filepath.Join(c.KubeBin, "agnhost"), mode: 0o755}}
	if dns {
		progs = append(progs, dnsTools...)
		refs = append(refs, e2eGlibcDNSImage)
		files = append(files, imageFile{path: "coredns", src: filepath.Join(c.KubeBin, "coredns"), mode: 0o755},
			imageFile{path: "etc", mode: 0o755}, imageFile{path: "etc/nsswitch.conf", data: nsswitchConf, mode: 0o644})
	}
	tools, err := programFiles(progs)
	if err != nil {
		return nil, fmt.Errorf("agnhost image: %w", err)
	}
	if err := writeImage(agn, refs, append(files, tools...), []string{"/agnhost"}, []string{"pause"}); err != nil {
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

// program is a program of this machine (src) and where an image holds it.
type program struct{ at, src string }

// programFiles are dynamically linked programs of this machine, each at
// its path in the image, and the libraries they load (as ldd lists them)
// at their own paths, with the folders holding them, each once.
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
		out, err := exec.Command("ldd", p.src).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", p.src, err)
		}
		add(p.at, p.src)
		for _, lib := range lddPaths(string(out)) {
			add(lib, lib)
		}
	}
	return files, nil
}

// lddPaths are the absolute paths of ldd's output ("name => path (addr)"
// or "path (addr)"; the kernel's vdso has none).
func lddPaths(out string) []string {
	var paths []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/") {
			paths = append(paths, f[2])
		} else if len(f) >= 1 && strings.HasPrefix(f[0], "/") {
			paths = append(paths, f[0])
		}
	}
	return paths
}

// importImages imports the image tarballs into node n's containerd, in
// the namespace the CRI uses.
func importImages(n NodeState, tars []string) error {
	for _, t := range tars {
		if _, err := run(inNode(n, "ctr", "-n", "k8s.io", "images", "import", t)...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}
