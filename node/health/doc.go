// Package health is calico-node's one health endpoint and its probe
// commands. Components (felix, confd, BIRD's supervisor, the BGP session
// check) register with an Aggregator and report readiness and, when they
// have a loop, a heartbeat that must tick within their timeout: a loop
// stuck in a call stops ticking and the agent stops being live, though its
// process runs. Server serves /liveness and /readiness (200 or 503, one
// line per component; ?component=felix,confd restricts the answer), on
// FELIX_HEALTHHOST:FELIX_HEALTHPORT (localhost:9099) as Calico's.
//
// Probe implements `calico-node -felix-live -felix-ready -bird-live
// -bird-ready` as Calico's: felix's answers from the endpoint, BIRD's
// from its control socket, with Calico's rule for BGP readiness
// (BIRDReady).
package health
