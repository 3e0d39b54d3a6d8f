package dataplane

import (
	"errors"
	"testing"
)

func TestNftablesEnabled(t *testing.T) {
	kp := func(on bool, err error) func() (bool, error) { return func() (bool, error) { return on, err } }
	broken := errors.New("netlink refused")
	for _, tc := range []struct {
		mode    string
		detect  func() (bool, error)
		want    bool
		wantErr bool
	}{
		{"Enabled", kp(false, broken), true, false},
		{"Disabled", kp(true, nil), false, false},
		{"Auto", kp(true, nil), true, false},
		{"Auto", kp(false, nil), false, false},
		{"auto", kp(false, broken), false, true},
		{"Sometimes", kp(true, nil), false, true},
	} {
		got, err := NftablesEnabled(tc.mode, tc.detect)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %v, %v; want %v, error %v", tc.mode, got, err, tc.want, tc.wantErr)
		}
	}
}
