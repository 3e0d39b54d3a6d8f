package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// watchEvent is one change of a watched key. Type is "" for a put.
type watchEvent struct {
	Type   string    `json:"type"` // "" (PUT) or "DELETE"
	Kv     keyValue  `json:"kv"`
	PrevKv *keyValue `json:"prev_kv"`
}

type watchResponse struct {
	Header          header       `json:"header"`
	Created         bool         `json:"created"`
	Canceled        bool         `json:"canceled"`
	CompactRevision rev          `json:"compact_revision"`
	CancelReason    string       `json:"cancel_reason"`
	Events          []watchEvent `json:"events"`
}

// watchMessage is one line of the gateway's watch stream: a response, or
// the error that ended the stream.
type watchMessage struct {
	Result *watchResponse `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type watchCreate struct {
	Create struct {
		Key           []byte `json:"key"`
		RangeEnd      []byte `json:"range_end"`
		StartRevision rev    `json:"start_revision,omitempty"`
		PrevKv        bool   `json:"prev_kv"`
	} `json:"create_request"`
}

// errStreamBroken is a watch stream that ended without saying why: the
// connection broke or the server went away.
var errStreamBroken = errors.New("etcd watch stream broken")

// errCompacted is a watch that asked for history etcd no longer has.
var errCompacted = errors.New("etcd: required revision has been compacted")

// watchPrefix streams the changes under prefix after fromRev (0: from
// now) to handle, until ctx ends, handle returns false or the stream
// fails. It returns nil only when ctx ended or handle stopped it.
func (g *gateway) watchPrefix(ctx context.Context, prefix string, fromRev int64, handle func(*watchResponse) bool) error {
	req := watchCreate{}
	req.Create.Key = []byte(prefix)
	req.Create.RangeEnd = prefixEnd(prefix)
	req.Create.StartRevision = rev(fromRev)
	req.Create.PrevKv = true
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var resp *http.Response
	if err := g.onEndpoints(ctx, func(idx int) (err error) {
		resp, err = g.send(ctx, idx, "/v3/watch", body)
		return err
	}); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return decodeResponse(resp, nil)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg watchMessage
		if err := dec.Decode(&msg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: %w", errStreamBroken, err)
		}
		switch {
		case msg.Error != nil:
			return fmt.Errorf("etcd watch: %s", msg.Error.Message)
		case msg.Result == nil:
			continue
		case msg.Result.CompactRevision != 0:
			return errCompacted
		case msg.Result.Canceled:
			return fmt.Errorf("etcd watch canceled: %s", msg.Result.CancelReason)
		}
		if !handle(msg.Result) {
			return nil
		}
	}
}
