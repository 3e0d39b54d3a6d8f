package collector_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/collector"
)

func flow(srcNS, src, dstNS, dst, action string) collector.Flow {
	return collector.Flow{FlowKey: collector.FlowKey{
		Source: collector.Endpoint{Kind: "wep", Namespace: srcNS, Name: src},
		Dest:   collector.Endpoint{Kind: "wep", Namespace: dstNS, Name: dst}, Action: action}}
}

// TestStoreHandler: the kept flows filtered by namespace, pod and action,
// and with follow the later flushes as they are published.
func TestStoreHandler(t *testing.T) {
	s := collector.NewStore(3)
	s.Publish([]collector.Flow{flow("dev", "a", "prod", "web", "Allow"), flow("dev", "a", "prod", "db", "Deny")})
	s.Publish([]collector.Flow{flow("x", "b", "x", "c", "Deny"), flow("x", "c", "y", "d", "Allow")})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(query string) []collector.Flow {
		resp, err := http.Get(srv.URL + "/flows?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []collector.Flow
		dec := json.NewDecoder(resp.Body)
		for dec.More() {
			var f collector.Flow
			if err := dec.Decode(&f); err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		return out
	}
	if got := get(""); len(got) != 3 || got[0].Dest.Name != "db" {
		t.Errorf("kept (max 3): %+v", got)
	}
	if got := get("action=deny"); len(got) != 2 {
		t.Errorf("deny: %+v", got)
	}
	if got := get("namespace=y"); len(got) != 1 || got[0].Dest.Name != "d" {
		t.Errorf("namespace y: %+v", got)
	}
	if got := get("pod=x/c"); len(got) != 2 {
		t.Errorf("pod x/c: %+v", got)
	}
	if got := get("pod=dev/c"); len(got) != 0 {
		t.Errorf("pod dev/c: %+v", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/flows?follow=true&action=allow&namespace=z", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	go func() {
		for ctx.Err() == nil {
			s.Publish([]collector.Flow{flow("z", "p", "z", "q", "Deny"), flow("z", "p", "z", "q", "Allow")})
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if !lines.Scan() {
		t.Fatalf("follow: no line: %v", lines.Err())
	}
	var f collector.Flow
	if err := json.Unmarshal(lines.Bytes(), &f); err != nil || f.Action != "Allow" || f.Source.Namespace != "z" {
		t.Errorf("followed flow %s: %v", lines.Bytes(), err)
	}
}
