package syncproto

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"

	"github.com/golang/snappy"
)

// Encoder writes Envelopes to one connection, plain or into a snappy
// stream.
type Encoder struct {
	enc *gob.Encoder
	zw  *snappy.Writer // nil when plain
}

// NewEncoder returns an Encoder over w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{enc: gob.NewEncoder(w)} }

// NewCompressedEncoder returns an Encoder writing a new stream compressed
// with alg over w.
func NewCompressedEncoder(w io.Writer, alg string) (*Encoder, error) {
	if alg != CompressionSnappy {
		return nil, fmt.Errorf("unsupported compression %q", alg)
	}
	zw := snappy.NewBufferedWriter(w)
	return &Encoder{enc: gob.NewEncoder(zw), zw: zw}, nil
}

// Send writes one message (buffered while compressing: see Flush).
func (e *Encoder) Send(msg any) error {
	if err := e.enc.Encode(&Envelope{Message: msg}); err != nil {
		return fmt.Errorf("sending %T: %w", msg, err)
	}
	return nil
}

// Flush passes what the compressor holds to the writer beneath.
func (e *Encoder) Flush() error {
	if e.zw == nil {
		return nil
	}
	return e.zw.Flush()
}

// Decoder reads Envelopes from one connection.
type Decoder struct{ dec *gob.Decoder }

// NewDecoder returns a Decoder over r. r should be an io.ByteReader (a
// bufio.Reader) so that the decoder reads no further than each message:
// after a MsgDecoderRestart the rest of r belongs to the next decoder.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{dec: gob.NewDecoder(r)} }

// NewCompressedDecoder returns a Decoder of a new stream compressed with
// alg ("" for a plain one) read from r.
func NewCompressedDecoder(r io.Reader, alg string) (*Decoder, error) {
	switch alg {
	case "":
		return NewDecoder(r), nil
	case CompressionSnappy:
		return NewDecoder(snappy.NewReader(r)), nil
	}
	return nil, fmt.Errorf("unsupported compression %q", alg)
}

// Receive reads one message.
func (d *Decoder) Receive() (any, error) {
	var env Envelope
	if err := d.dec.Decode(&env); err != nil {
		return nil, err
	}
	return env.Message, nil
}

// BinarySnapshot is a snapshot encoded once for every client: a whole
// snappy stream of MsgKVs (maxMsg keys each), the MsgSyncStatus, and a
// closing MsgDecoderRestart.
type BinarySnapshot struct {
	Bytes    []byte
	RawBytes int // before compression
}

// EncodeBinarySnapshot encodes kvs and status as a BinarySnapshot.
func EncodeBinarySnapshot(kvs []SerializedUpdate, status SyncStatus, maxMsg int) (BinarySnapshot, error) {
	var out bytes.Buffer
	zw := snappy.NewBufferedWriter(&out)
	raw := &countingWriter{w: zw}
	enc := gob.NewEncoder(raw)
	send := func(msg any) error { return enc.Encode(&Envelope{Message: msg}) }
	for len(kvs) > 0 {
		n := min(len(kvs), maxMsg)
		if err := send(MsgKVs{KVs: kvs[:n]}); err != nil {
			return BinarySnapshot{}, err
		}
		kvs = kvs[n:]
	}
	if err := send(MsgSyncStatus{SyncStatus: status}); err != nil {
		return BinarySnapshot{}, err
	}
	if err := send(MsgDecoderRestart{Message: "End of compressed snapshot.", CompressionAlgorithm: CompressionSnappy}); err != nil {
		return BinarySnapshot{}, err
	}
	if err := zw.Close(); err != nil {
		return BinarySnapshot{}, err
	}
	return BinarySnapshot{Bytes: out.Bytes(), RawBytes: raw.n}, nil
}

type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
