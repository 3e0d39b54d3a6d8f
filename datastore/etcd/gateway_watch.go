package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// watchMessage is one line of the gateway's watch stream: a response, or
// the error that ended the stream.
type watchMessage struct {
	Result *kvpb.WatchResponse `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type watchCreate struct {
	Create struct {
		Key           []byte   `json:"key"`
		RangeEnd      []byte   `json:"range_end"`
		StartRevision kvpb.Rev `json:"start_revision,omitempty"`
		PrevKv        bool     `json:"prev_kv"`
	} `json:"create_request"`
}

// errStreamBroken is a watch stream that ended without saying why: the
// connection broke or the server went away.
var errStreamBroken = errors.New("etcd watch stream broken")

// Watch streams the changes under prefix after fromRev (0: from
// now) to handle, until ctx ends, handle returns false or the stream
// fails. It returns nil only when ctx ended or handle stopped it.
func (g *gateway) Watch(ctx context.Context, prefix string, fromRev int64, handle func(*kvpb.WatchResponse) bool) error {
	req := watchCreate{}
	req.Create.Key = []byte(prefix)
	req.Create.RangeEnd = kvpb.PrefixEnd(prefix)
	req.Create.StartRevision = kvpb.Rev(fromRev)
	req.Create.PrevKv = true
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	token, err := g.token(ctx)
	if err != nil {
		return err
	}
	var resp *http.Response
	if err := g.onEndpoints(ctx, func(idx int) (err error) {
		resp, err = g.send(ctx, idx, "/v3/watch", body, token)
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
			return kvpb.ErrCompacted
		case msg.Result.Canceled:
			return fmt.Errorf("etcd watch canceled: %s", msg.Result.CancelReason)
		}
		if !handle(msg.Result) {
			return nil
		}
	}
}
