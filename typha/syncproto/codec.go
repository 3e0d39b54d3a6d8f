package syncproto

import (
	"encoding/gob"
	"fmt"
	"io"
)

// Encoder writes Envelopes to one connection.
type Encoder struct{ enc *gob.Encoder }

// NewEncoder returns an Encoder over w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{enc: gob.NewEncoder(w)} }

// Send writes one message.
func (e *Encoder) Send(msg any) error {
	if err := e.enc.Encode(&Envelope{Message: msg}); err != nil {
		return fmt.Errorf("sending %T: %w", msg, err)
	}
	return nil
}

// Decoder reads Envelopes from one connection.
type Decoder struct{ dec *gob.Decoder }

// NewDecoder returns a Decoder over r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{dec: gob.NewDecoder(r)} }

// Receive reads one message.
func (d *Decoder) Receive() (any, error) {
	var env Envelope
	if err := d.dec.Decode(&env); err != nil {
		return nil, err
	}
	return env.Message, nil
}
