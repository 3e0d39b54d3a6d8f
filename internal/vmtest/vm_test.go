package vmtest

import (
	"slices"
	"strings"
	"testing"
)

// TestQemuArgs: the pitfalls measured on this kind of machine are in the
// command line: software emulation on every vCPU (/dev/kvm runs only PVM
// guests), no_timer_check (concurrent VMs panicked without it),
// tsc=reliable (the HPET otherwise: Go's clock reads as system calls), the
// shared image never written, the NIC on the segment's tap.
func TestQemuArgs(t *testing.T) {
	c := VMConfig{Image: Image{Root: "/img/root.img", Kernel: "/img/vmlinuz", Initrd: "/img/initrd.img"}, ID: 3,
		Tap: "tap3", MAC: NodeMAC(3), Share: "/share", MemMiB: 512, CPUs: 2}
	args := c.qemuArgs("/share/console-3.log")
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg,thread=multi", "-cpu max", "-m 512", "-smp 2", "-serial file:/share/console-3.log",
		"file=/img/root.img,if=virtio,format=raw,snapshot=on", "local,path=/share,mount_tag=share,security_model=none",
		"tap,id=n0,ifname=tap3,script=no,downscript=no", "mac=52:54:00:7a:00:03",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("qemu args lack %q:\n%s", want, joined)
		}
	}
	i := slices.Index(args, "-append")
	if i < 0 || !strings.Contains(args[i+1], "no_timer_check") || !strings.Contains(args[i+1], "tsc=reliable") || !strings.Contains(args[i+1], "tabby.id=3") ||
		!strings.Contains(args[i+1], "init=/sbin/tabbyinit") {
		t.Errorf("kernel command line: %v", args)
	}
	if slices.Contains(args, "-enable-kvm") || strings.Contains(joined, "accel kvm") {
		t.Errorf("KVM requested: %s", joined)
	}
}

func TestAddressing(t *testing.T) {
	if got := NodeAddr(1, 2).String(); got != "172.30.2.12/24" {
		t.Errorf("NodeAddr(1, 2) = %s", got)
	}
	if got := RouterAddr(0).String(); got != "172.30.1.1/24" {
		t.Errorf("RouterAddr(0) = %s", got)
	}
	if NodeMAC(0) == NodeMAC(1) {
		t.Error("two nodes share a MAC")
	}
}
