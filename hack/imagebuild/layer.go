package main

import (
	"archive/tar"
	"bytes"
	"time"
)

// Tar writes the tree as a layer: entries in path order (parents before
// children), owned by 0:0 with no user or group names, every time set
// to mtime, so the same tree always gives the same bytes.
func (t *Tree) Tar(mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, p := range t.Paths() {
		e := t.entries[p]
		h := &tar.Header{Name: p, Mode: e.Mode, ModTime: mtime, Format: tar.FormatPAX}
		switch e.Kind {
		case Dir:
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		case File:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		case Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if e.Kind == File {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
