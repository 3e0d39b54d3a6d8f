// Command calico is the CNI plugin container runtimes call for every pod
// (ADD, DEL, CHECK, STATUS, GC, VERSION; CNI spec 0.3.0 to 1.1.0). It only
// hands skel's callbacks to cni-plugin/plugin.
//
// This binary serves the etcd datastore and stays lean: a pod ADD pays
// for every package initialiser at start-up, and client-go's typed
// clientset alone costs ~5 ms. For datastore_type kubernetes, and for an
// etcd-mode ADD that reads the pod from Kubernetes (policy type k8s and a
// kubeconfig), it hands the call, unchanged, to calico-k8s installed
// beside it. install-cni spares the Kubernetes datastore that second
// process start: it installs calico-k8s as calico there.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd"
)

func main() {
	plugin.Started = time.Now()
	// One call per process, a few MB allocated: collecting garbage only
	// costs time. The limit keeps a runaway call bounded all the same.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(256 << 20)
	stdin, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdin+1))
	if err != nil {
		fail(types.NewError(types.ErrIOFailure, "reading the network configuration", err.Error()))
	}
	if len(stdin) > maxStdin {
		fail(types.NewError(types.ErrDecodingFailure, "reading the network configuration",
			fmt.Sprintf("it is larger than %d MiB", maxStdin>>20)))
	}
	if err := replaceStdin(stdin); err != nil {
		fail(types.NewError(types.ErrIOFailure, "passing the network configuration on", err.Error()))
	}
	kubernetes, endpoints := netconf.DatastoreOf(stdin)
	if kubernetes || readsPodFromKubernetes(stdin, os.Getenv) {
		execKubernetesPlugin()
	}
	if os.Getenv("CNI_COMMAND") != "VERSION" {
		// Connect to etcd while the call is parsed and checked.
		etcd.Predial(netconf.SplitEndpoints(endpoints))
	}
	skel.PluginMainFuncs(plugin.New(dsconfig.Backends{}).Funcs(), plugin.SupportedVersions, plugin.About)
}

// maxStdin bounds the network configuration read from stdin: real ones
// are a few KiB, and the runtime's whole call must fit the memory limit.
const maxStdin = 64 << 20

// readsPodFromKubernetes: an etcd-mode ADD of a Kubernetes pod whose
// config gives policy type k8s and a kubeconfig (or API root) reads the
// pod from Kubernetes, as Calico's plugin does (its labels, service
// account and IPAM annotations; see plugin.PodReader), which needs
// calico-k8s. Other calls stay in this lean binary.
func readsPodFromKubernetes(conf []byte, getenv func(string) string) bool {
	if getenv("CNI_COMMAND") != "ADD" {
		return false
	}
	args := ";" + getenv("CNI_ARGS") + ";"
	if !strings.Contains(args, ";K8S_POD_NAME=") || !strings.Contains(args, ";K8S_POD_NAMESPACE=") {
		return false
	}
	var c struct {
		Policy struct {
			Type string `json:"type"`
		} `json:"policy"`
		Kubernetes struct {
			Kubeconfig string `json:"kubeconfig"`
			K8sAPIRoot string `json:"k8s_api_root"`
		} `json:"kubernetes"`
	}
	if json.Unmarshal(conf, &c) != nil {
		return false
	}
	return c.Policy.Type == "k8s" && (c.Kubernetes.Kubeconfig != "" || c.Kubernetes.K8sAPIRoot != "")
}

// origStdin keeps the *os.File that os.Stdin was before replaceStdin:
// were it collected, its finalizer would close fd 0, which by then is the
// memfd that skel reads ("bad file descriptor" on large inputs, whose
// allocations make the garbage collector run).
var origStdin *os.File

// replaceStdin puts the bytes already read back on fd 0 (in a memfd), so
// skel, or the program exec'd next, reads them from the start.
func replaceStdin(data []byte) error {
	fd, err := unix.MemfdCreate("cni-stdin", 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "cni-stdin")
	if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := unix.Dup2(fd, 0); err != nil {
		return err
	}
	f.Close()
	origStdin = os.Stdin
	os.Stdin = os.NewFile(0, "/dev/stdin")
	return nil
}

func execKubernetesPlugin() {
	self, err := os.Executable()
	if err != nil {
		fail(types.NewError(types.ErrInternal, "finding calico-k8s", err.Error()))
	}
	path := filepath.Join(filepath.Dir(self), "calico-k8s")
	err = syscall.Exec(path, []string{path}, os.Environ())
	fail(types.NewError(types.ErrInternal, "datastore_type kubernetes needs calico-k8s installed beside calico",
		fmt.Sprintf("exec %s: %v", path, err)))
}

func fail(e *types.Error) {
	_ = e.Print()
	os.Exit(1)
}
