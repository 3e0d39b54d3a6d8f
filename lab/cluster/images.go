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
	src  string // on this machine; "" for a folder (or data's file, link's link)
	data string // the file's content, when src is ""
	link string // a symbolic link's target, when src is ""
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
		"config": map[string]any{"Entrypoint": entrypoint, "Cmd": cmd, "Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin:/"}},
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
		if fe.src == "" && fe.link != "" {
			h.Typeflag, h.Linkname = tar.TypeSymlink, fe.link
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
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
