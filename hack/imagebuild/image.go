package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Layer is one uncompressed layer and the history line that says what
// it is.
type Layer struct {
	Tar       []byte
	CreatedBy string
}

// ImageConfig is what the image's configuration says besides layers.
type ImageConfig struct {
	Created time.Time
	Cmd     []string
	Version string
}

// BuildImage assembles the image from its layers, in order. The layers
// and the configuration fully decide the digest.
func BuildImage(layers []Layer, c ImageConfig) (v1.Image, error) {
	created := v1.Time{Time: c.Created.UTC()}
	img := empty.Image
	for _, l := range layers {
		data := l.Tar
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		})
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: created, CreatedBy: l.CreatedBy, Comment: "hack/imagebuild"},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = "amd64", "linux", created
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Cmd = c.Cmd
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "tabby",
		"org.opencontainers.image.version": c.Version,
		"org.opencontainers.image.source":  "https://github.com/tabbynet/tabby",
	}
	return mutate.ConfigFile(img, cf)
}

// WriteTarball writes img as a docker-archive tarball (docker load, ctr
// images import) named ref, atomically.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
