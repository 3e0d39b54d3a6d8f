// Package harness is what the lab (package lab) and the real cluster
// (lab/cluster) share about the processes they start and the state folder
// they keep: detached processes marked with the harness's ID in their
// environment (so that down finds them even after the harness was killed),
// their logs, killing them, and the state file written atomically after
// every step. It knows nothing of nodes, pods or Kubernetes.
package harness
