// Package nodestatus fills in the status of the CalicoNodeStatus resources
// naming this node, as calico-node's status reporter does: for each
// requested class (Agent, BGP, Routes) and IP version it reads BIRD over
// its control socket (BIRD 2 serves both versions; the IP version of a
// session or route comes from its address) and writes the status when it
// changed, on a spec change and every spec.updatePeriodSeconds (none: only
// on spec changes; 0: likewise). Build (build.go) is the pure part.
package nodestatus
