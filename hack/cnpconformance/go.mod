// The network-policy-api conformance suite as `make e2e-cnp` runs it: a
// module of its own (outside Tabby's), built by
// hack/build-cnp-conformance.sh in a copy under the cache with the suite's
// manifests beside it (they are embedded).
module tabby.local/cnpconformance

go 1.26.0

require sigs.k8s.io/network-policy-api v0.2.0
