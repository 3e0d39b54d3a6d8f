package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlanNodes(t *testing.T) {
	got := planNodes("/s", "tk1", 3, 2)
	want := []struct{ name, addr string }{{"node-1", "10.77.0.11/24"}, {"node-2", "10.77.0.12/24"}, {"node-3", "10.77.1.11/24"}}
	if len(got) != len(want) {
		t.Fatalf("%d nodes, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Addr != w.addr || got[i].Netns != "tk1-"+w.name {
			t.Errorf("node %d: %+v, want %s at %s", i, got[i], w.name, w.addr)
		}
	}
}

// TestWriteImageReproducible: the same files give the same tarball.
func TestWriteImageReproducible(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var outs [][]byte
	for i, name := range []string{"a.tar", "b.tar"} {
		if i == 1 { // a later mtime must not change the image
			_ = os.Chtimes(src, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
		}
		p := filepath.Join(dir, name)
		if err := writeImage(p, []string{"example/x:1"}, []imageFile{{path: "tmp", mode: 0o1777}, {path: "prog", src: src, mode: 0o755}}, []string{"/prog"}, nil); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Error("two writes of the same image differ")
	}
	if !bytes.Contains(outs[0], []byte(`"RepoTags":["example/x:1"]`)) {
		t.Error("manifest.json does not name the image")
	}
}

// TestLddPaths: the libraries ldd lists with a path (not the vdso) and
// the dynamic loader.
func TestLddPaths(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f7e)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f7e)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f7e)\n"
	got := lddPaths(out)
	want := []string{"/lib/x86_64-linux-gnu/libtinfo.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if len(got) != len(want) {
		t.Fatalf("%q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// TestProgramFilesOnce: programs sharing libraries give each path once,
// and a program can sit at another path in the image (dash as /bin/sh).
func TestProgramFilesOnce(t *testing.T) {
	files, err := programFiles([]program{{"/bin/bash", "/bin/bash"}, {"/bin/sh", "/usr/bin/dash"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range files {
		seen[f.path]++
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s %d times", p, n)
		}
	}
	if seen["bin/sh"] != 1 || seen["bin/bash"] != 1 || seen["bin"] != 1 {
		t.Errorf("files %v: want bin, bin/bash and bin/sh", seen)
	}
}

// TestKubeletConfigDNS: the kubelets name the cluster DNS only when the
// cluster runs one.
func TestKubeletConfigDNS(t *testing.T) {
	n := NodeState{Name: "node-1"}
	for _, dns := range []bool{false, true} {
		c := &Cluster{State: State{Prefix: "tk1", DNS: dns}}
		got := strings.Contains(c.kubeletConfig(n), "\nclusterDNS: [10.96.0.10]\n")
		if got != dns {
			t.Errorf("DNS %v: clusterDNS in the kubelet's config: %v", dns, got)
		}
	}
}
