package syncproto

import (
	"bufio"
	"bytes"
	"testing"
)

// TestCompression: a snappy stream reads back as sent; a compression this
// side does not know is refused on both sides, never read as plain.
func TestCompression(t *testing.T) {
	var buf bytes.Buffer
	enc, err := NewCompressedEncoder(&buf, CompressionSnappy)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Send(MsgSyncStatus{SyncStatus: StatusInSync}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	dec, err := NewCompressedDecoder(bufio.NewReader(&buf), CompressionSnappy)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := dec.Receive(); err != nil || msg != (MsgSyncStatus{SyncStatus: StatusInSync}) {
		t.Fatalf("got %v, %v", msg, err)
	}
	if _, err := NewCompressedEncoder(&buf, "zstd"); err == nil {
		t.Error("an encoder for zstd was made")
	}
	if _, err := NewCompressedDecoder(&buf, "zstd"); err == nil {
		t.Error("a decoder for zstd was made")
	}
}
