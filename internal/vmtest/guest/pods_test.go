package guest

import "testing"

func TestPodNames(t *testing.T) {
	for _, c := range []struct{ key, netns, full string }{
		{"a", "pod-a", "default/a"},
		{"default/a", "pod-a", "default/a"},
		{"x/a", "pod-x-a", "x/a"},
	} {
		if got := podNetns(c.key); got != c.netns {
			t.Errorf("podNetns(%q) = %q, want %q", c.key, got, c.netns)
		}
		if got := podKey(c.key); got != c.full {
			t.Errorf("podKey(%q) = %q, want %q", c.key, got, c.full)
		}
	}
	if got := (PodRequest{Name: "a"}).Key(); got != "default/a" {
		t.Errorf("Key = %q", got)
	}
}
