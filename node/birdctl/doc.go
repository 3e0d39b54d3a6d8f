// Package birdctl talks to a running BIRD 2 over its control socket (the
// protocol birdc speaks: a command line in, numbered reply lines out),
// without running birdc: calico-node's health checks, its BGP status
// reporting and its BIRD supervisor use it. The parsers (BGP peers from
// `show protocols`, the daemon from `show status`, routes from `show
// route`) are pure and unit-tested on BIRD's output.
package birdctl
