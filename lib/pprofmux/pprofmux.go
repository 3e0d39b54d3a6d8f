// Package pprofmux serves Go's profiling handlers on /debug/pprof/, for
// the components' debug ports (felix's DebugPort, kube-controllers'
// debugProfilePort, as Calico's).
package pprofmux

import (
	"net/http"
	"net/http/pprof"
)

// New returns a mux with Go's profiling handlers on /debug/pprof/.
func New() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
