package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// RequiredBinaries must be in the source folder: the plugin, its IPAM
// plugin, and calico-k8s, to which calico hands Kubernetes-datastore calls.
var RequiredBinaries = []string{"calico", "calico-ipam", "calico-k8s"}

// WriteFileAtomic replaces path with data and mode: a temporary file in
// the same folder is written, synced and renamed over path, so readers
// see the old content or the new, never a part of it. A failure leaves
// path as it was and no temporary file behind.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // best effort: the rename survives a crash
		d.Close()
	}
	return nil
}

// copyFileAtomic copies src over dst atomically with mode.
func copyFileAtomic(src, dst string, mode os.FileMode) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	return WriteFileAtomic(dst, data, mode)
}

// InstallBinaries copies every regular file of srcDir (the image's CNI
// binaries) into dstDir, mode 0755, atomically, except those named in
// skip; with update false, binaries already in dstDir are left alone (as
// Calico's UPDATE_CNI_BINARIES=false). It returns the names installed.
// RequiredBinaries missing from srcDir (and not skipped) is an error and
// nothing is installed.
func InstallBinaries(srcDir, dstDir string, skip []string, update bool) ([]string, error) {
	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return nil, fmt.Errorf("reading the CNI binaries: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && !slices.Contains(skip, e.Name()) {
			names = append(names, e.Name())
		}
	}
	for _, req := range RequiredBinaries {
		if !slices.Contains(names, req) && !slices.Contains(skip, req) {
			return nil, fmt.Errorf("the CNI binary %s is not in %s", req, srcDir)
		}
	}
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dstDir, err)
	}
	var installed []string
	for _, name := range names {
		dst := filepath.Join(dstDir, name)
		if !update {
			if _, err := os.Stat(dst); err == nil {
				continue
			} else if !errors.Is(err, os.ErrNotExist) {
				return installed, fmt.Errorf("checking %s: %w", dst, err)
			}
		}
		if err := copyFileAtomic(filepath.Join(srcDir, name), dst, 0o755); err != nil {
			return installed, fmt.Errorf("installing %s: %w", name, err)
		}
		installed = append(installed, name)
	}
	return installed, nil
}

// The etcd TLS files Calico's manifests mount at /calico-secrets.
var tlsAssets = []string{"etcd-ca", "etcd-cert", "etcd-key"}

// InstallTLSAssets copies the etcd TLS files present in srcDir into
// netDir/calico-tls (mode 0600) and returns, by asset name, the path the
// host sees each at (hostNetDir/calico-tls/<name>).
func InstallTLSAssets(srcDir, netDir, hostNetDir string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range tlsAssets {
		src := filepath.Join(srcDir, name)
		st, err := os.Stat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", src, err)
		}
		if st.Size() == 0 {
			continue // an empty Secret key
		}
		dir := filepath.Join(netDir, "calico-tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := copyFileAtomic(src, filepath.Join(dir, name), 0o600); err != nil {
			return nil, err
		}
		out[name] = filepath.Join(hostNetDir, "calico-tls", name)
	}
	return out, nil
}
