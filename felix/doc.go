// Package felix will hold the node agent: watchers feed a pure calculation
// graph (calc/), whose desired state is rendered (rules/) and reconciled into
// iptables, ipsets and routes by drivers (dataplane/). Not yet implemented:
// see the [felix-policy] issue.
package felix
