package etcd

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// tokenAuth holds the hand-written transport's etcd auth token: fetched
// with the username and password on first use (one request at a time),
// dropped and fetched again when etcd says it expired.
type tokenAuth struct {
	user, password string

	mu    sync.Mutex
	value string
}

// token returns the auth token to send ("" without a username).
func (g *gateway) token(ctx context.Context) (string, error) {
	a := g.auth
	if a == nil {
		return "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.value != "" {
		return a.value, nil
	}
	req := kvpb.AuthenticateRequest{Name: a.user, Password: a.password}
	frame := grpcFrame(req.Marshal())
	var out []byte
	err := g.onEndpoints(ctx, func(idx int) (err error) {
		out, err = g.unaryOn(ctx, idx, "/etcdserverpb.Auth/Authenticate", frame, "")
		return err
	})
	if err != nil {
		return "", err
	}
	var resp kvpb.AuthenticateResponse
	if err := resp.Unmarshal(out); err != nil {
		return "", err
	}
	if resp.Token == "" {
		return "", errors.New("etcd answered the authentication without a token: is auth enabled on etcd?")
	}
	a.value = resp.Token
	return a.value, nil
}

// drop forgets token, unless another request already replaced it.
func (a *tokenAuth) drop(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.value == token {
		a.value = ""
	}
}

// isInvalidToken reports etcd's answer to an expired or unknown token.
func isInvalidToken(err error) bool {
	var se *kvpb.ServerError
	return errors.As(err, &se) && se.Code == codeUnauthenticated && strings.Contains(se.Message, "invalid auth token")
}
