package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
)

// DefaultHintDir is where the plugin remembers, between its one-call
// processes, which IPAM blocks are affine to the node. TABBY_CNI_HINT_DIR
// in the plugin's environment moves it (tests keep theirs in a temporary
// folder).
const DefaultHintDir = "/var/lib/cni/tabby"

func hintDir() string {
	if d := os.Getenv("TABBY_CNI_HINT_DIR"); d != "" {
		return d
	}
	return DefaultHintDir
}

// blockHints is the node's affine blocks as the last ADD saw them. It is
// only a guess about the datastore: IPAM reads the hinted blocks in the
// same transaction as the node's affinities and keeps them only if that
// transaction shows them affine (ipam.Allocator.Warm), so a stale or
// wrong file costs one more read, never a wrong allocation.
type blockHints struct {
	path string
	read []netip.Prefix
}

// loadBlockHints reads the hints for this node and datastore (nil when
// dir is empty or the file is missing or unreadable).
func loadBlockHints(dir string, c *netconf.NetConf, node string) *blockHints {
	if dir == "" {
		return &blockHints{}
	}
	h := &blockHints{path: filepath.Join(dir, "ipam-blocks-"+nodeKey(c, node))}
	data, err := readHintFile(h.path)
	if err != nil {
		return h
	}
	for _, line := range strings.Fields(string(data)) {
		if p, err := netip.ParsePrefix(line); err == nil {
			h.read = append(h.read, p)
		}
	}
	return h
}

// maxHintFile bounds what is read of a hint file: a node's affine blocks
// take a few hundred bytes.
const maxHintFile = 64 << 10

// readHintFile reads a hint file that is a regular file of at most
// maxHintFile bytes. It never blocks: a FIFO, a device or a link to one
// (placed there by someone else) is no hint at all.
func readHintFile(path string) ([]byte, error) {
	// Never open anything but a regular file: opening some devices has
	// effects of its own.
	if st, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxHintFile {
		return nil, fmt.Errorf("%s is not a hint file (%s, %d bytes)", path, st.Mode().Type(), st.Size())
	}
	return io.ReadAll(io.LimitReader(f, maxHintFile))
}

// nodeKey names a node's files in the hint folder: one per datastore and
// node.
func nodeKey(c *netconf.NetConf, node string) string {
	sum := sha256.Sum256([]byte(c.DatastoreType + "\x00" + c.EtcdEndpoints + "\x00" + node))
	return hex.EncodeToString(sum[:8])
}

// save records blocks when they differ from what was read. Failing to
// write is harmless (the next call reads without hints).
func (h *blockHints) save(blocks []netip.Prefix) {
	if h.path == "" || len(blocks) == 0 || slices.Equal(blocks, h.read) {
		return
	}
	var b strings.Builder
	for _, p := range blocks {
		b.WriteString(p.String() + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return
	}
	// Write aside and rename: concurrent ADDs never see half a file.
	f, err := os.CreateTemp(filepath.Dir(h.path), ".ipam-blocks-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(b.String())
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), h.path) != nil {
		os.Remove(f.Name())
	}
}
