// Package plugin is the `calico` CNI plugin's logic: ADD, DEL, CHECK,
// STATUS and GC, orchestrating IPAM (calico-ipam in-process, any other
// IPAM plugin delegated through libcni), pod wiring (cni-plugin/wiring) and
// the WorkloadEndpoint record, with every failure after IPAM rolled back so
// nothing leaks. Errors carry CNI spec codes (see errors.go).
//
// The cmd/calico main only hands skel's callbacks to a Plugin.
package plugin
