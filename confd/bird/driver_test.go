package bird_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
)

func setup(t *testing.T) (*bird.Driver, *birdtest.Fake) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bird.conf")
	fake := &birdtest.Fake{ConfigPath: path}
	d, err := bird.NewDriver(path, fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(context.Background(), "v1"); err != nil {
		t.Fatal(err)
	}
	fake.Calls = nil
	return d, fake
}

func live(t *testing.T, d *bird.Driver) string {
	t.Helper()
	b, err := os.ReadFile(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	rejected := &bird.ConfigError{Stage: "validate", Message: "/x/bird.conf.new:3:7 syntax error"}
	for _, tc := range []struct {
		name                  string
		validateErr, cfgErr   error
		text                  string
		wantLive, wantRunning string
		wantCalls             []string
		wantErr               error
	}{
		{name: "new config", text: "v2", wantLive: "v2", wantRunning: "v2", wantCalls: []string{"validate", "configure"}},
		{name: "unchanged is a no-op", text: "v1", wantLive: "v1", wantRunning: "v1"},
		{name: "rejected by bird -p keeps old", text: "v2", validateErr: rejected,
			wantLive: "v1", wantRunning: "v1", wantCalls: []string{"validate"}, wantErr: bird.ErrInvalidConfig},
		{name: "failed configure restores old file", text: "v2",
			cfgErr:   &bird.ConfigError{Stage: "configure", Message: "/x/bird.conf:1:1 boom"},
			wantLive: "v1", wantRunning: "v1", wantCalls: []string{"validate", "configure"}, wantErr: bird.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, fake := setup(t)
			fake.ValidateErr, fake.ConfigureErr = tc.validateErr, tc.cfgErr
			err := d.Apply(ctx, tc.text)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply error = %v, want %v", err, tc.wantErr)
			}
			if got := live(t, d); got != tc.wantLive {
				t.Errorf("live file = %q, want %q", got, tc.wantLive)
			}
			if fake.Running != tc.wantRunning {
				t.Errorf("running = %q, want %q", fake.Running, tc.wantRunning)
			}
			if diff := cmp.Diff(tc.wantCalls, fake.Calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(d.Path() + ".new"); !os.IsNotExist(err) {
				t.Errorf("candidate file left behind: %v", err)
			}
		})
	}
}

func TestApplyRetriesAfterFailure(t *testing.T) {
	d, fake := setup(t)
	fake.ConfigureErr = errors.New("socket gone")
	if err := d.Apply(context.Background(), "v2"); err == nil {
		t.Fatal("want error")
	}
	fake.ConfigureErr = nil
	if err := d.Apply(context.Background(), "v2"); err != nil {
		t.Fatal(err)
	}
	if fake.Running != "v2" {
		t.Fatalf("running = %q after retry", fake.Running)
	}
}

func TestParseProtocols(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     2026-11-30 12:02:53.673  
Mesh_10_0_0_2 BGP        ---        up     2026-11-30 12:02:55.001  Established   
tabby_kernel4 Kernel     master4    up     12:02:53.673  
`
	got := bird.ParseProtocols(out)
	want := map[string]bird.Protocol{
		"device1":       {Name: "device1", Proto: "Device", Table: "---", State: "up", Since: "2026-11-30 12:02:53.673"},
		"Mesh_10_0_0_2": {Name: "Mesh_10_0_0_2", Proto: "BGP", Table: "---", State: "up", Since: "2026-11-30 12:02:55.001", Info: "Established"},
		"tabby_kernel4": {Name: "tabby_kernel4", Proto: "Kernel", Table: "master4", State: "up", Since: "12:02:53.673"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}
