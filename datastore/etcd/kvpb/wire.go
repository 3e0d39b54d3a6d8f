package kvpb

import "google.golang.org/protobuf/encoding/protowire"

// --- etcdserverpb encoding (field numbers from etcd's rpc.proto) ---

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendMessageField(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// RangeRequest: key 1, range_end 2, limit 3, revision 4, keys_only 8.
func (r *RangeRequest) Marshal() []byte {
	var b []byte
	b = appendBytesField(b, 1, r.Key)
	b = appendBytesField(b, 2, r.RangeEnd)
	if r.Limit > 0 {
		b = appendVarintField(b, 3, uint64(r.Limit))
	}
	if r.Revision > 0 {
		b = appendVarintField(b, 4, uint64(r.Revision))
	}
	if r.KeysOnly {
		b = appendVarintField(b, 8, 1)
	}
	return b
}

// RequestOp: request_range 1, request_put 2 (key 1, value 2),
// request_delete_range 3 (key 1, prev_kv 3).
func (op *RequestOp) Marshal() []byte {
	switch {
	case op.Range != nil:
		return appendMessageField(nil, 1, op.Range.Marshal())
	case op.Put != nil:
		m := appendBytesField(nil, 1, op.Put.Key)
		m = appendBytesField(m, 2, op.Put.Value)
		return appendMessageField(nil, 2, m)
	default:
		m := appendBytesField(nil, 1, op.Delete.Key)
		if op.Delete.PrevKv {
			m = appendVarintField(m, 3, 1)
		}
		return appendMessageField(nil, 3, m)
	}
}

// Compare: result 1 (EQUAL 0), target 2 (CREATE 1, MOD 2), key 3,
// create_revision 5, mod_revision 6. A zero revision is still written: it
// is the oneof's value.
func (c *Compare) Marshal() []byte {
	var b []byte
	target, num, v := uint64(2), protowire.Number(6), int64(0)
	switch {
	case c.CreateRevision != nil:
		target, num, v = 1, 5, int64(*c.CreateRevision)
	case c.ModRevision != nil:
		v = int64(*c.ModRevision)
	}
	b = appendVarintField(b, 2, target)
	b = appendBytesField(b, 3, c.Key)
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// TxnRequest: compare 1, success 2, failure 3.
func (t *TxnRequest) Marshal() []byte {
	var b []byte
	for i := range t.Compare {
		b = appendMessageField(b, 1, t.Compare[i].Marshal())
	}
	for i := range t.Success {
		b = appendMessageField(b, 2, t.Success[i].Marshal())
	}
	for i := range t.Failure {
		b = appendMessageField(b, 3, t.Failure[i].Marshal())
	}
	return b
}

// --- decoding ---

// eachField calls f for each field of a message, with the field's bytes
// (for length-delimited fields) or value (for varints).
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, bytes []byte, v uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var val []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, val, v); err != nil {
			return err
		}
	}
	return nil
}

// ResponseHeader: revision 3.
func (h *Header) Unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, _ []byte, v uint64) error {
		if num == 3 {
			h.Revision = Rev(v)
		}
		return nil
	})
}

// KeyValue: key 1, create_revision 2, mod_revision 3, value 5.
func (kv *KeyValue) Unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, v uint64) error {
		switch num {
		case 1:
			kv.Key = val
		case 2:
			kv.CreateRevision = Rev(v)
		case 3:
			kv.ModRevision = Rev(v)
		case 5:
			kv.Value = val
		}
		return nil
	})
}

// appendKeyValue decodes one KeyValue message onto kvs.
func appendKeyValue(kvs *[]KeyValue, b []byte) error {
	var kv KeyValue
	if err := kv.Unmarshal(b); err != nil {
		return err
	}
	*kvs = append(*kvs, kv)
	return nil
}

// RangeResponse: header 1, kvs 2, more 3, count 4.
func (r *RangeResponse) Unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, v uint64) error {
		switch num {
		case 1:
			return r.Header.Unmarshal(val)
		case 2:
			return appendKeyValue(&r.Kvs, val)
		case 3:
			r.More = v != 0
		case 4:
			r.Count = int64(v)
		}
		return nil
	})
}

// TxnResponse: header 1, succeeded 2, responses 3 (ResponseOp:
// response_range 1, response_delete_range 3 (DeleteRangeResponse:
// prev_kvs 3); puts carry nothing we use).
func (t *TxnResponse) Unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, v uint64) error {
		switch num {
		case 1:
			return t.Header.Unmarshal(val)
		case 2:
			t.Succeeded = v != 0
		case 3:
			var op ResponseOp
			err := eachField(val, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
				switch num {
				case 1:
					op.Range = &RangeResponse{}
					return op.Range.Unmarshal(val)
				case 3:
					op.Delete = &DeleteResponse{}
					return eachField(val, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
						if num == 3 {
							return appendKeyValue(&op.Delete.PrevKvs, val)
						}
						return nil
					})
				}
				return nil
			})
			if err != nil {
				return err
			}
			t.Responses = append(t.Responses, op)
		}
		return nil
	})
}

// AuthenticateRequest (etcdserverpb.Auth/Authenticate): name 1,
// password 2.
type AuthenticateRequest struct {
	Name, Password string
}

func (r *AuthenticateRequest) Marshal() []byte {
	b := appendBytesField(nil, 1, []byte(r.Name))
	return appendBytesField(b, 2, []byte(r.Password))
}

// AuthenticateResponse: header 1, token 2.
type AuthenticateResponse struct {
	Token string
}

func (r *AuthenticateResponse) Unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
		if num == 2 {
			r.Token = string(val)
		}
		return nil
	})
}
