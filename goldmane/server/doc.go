// Package server serves the aggregator's store over gRPC (Calico's
// Goldmane services): FlowCollector.Connect takes every node's flows,
// Flows.List, Stream and FilterHints answer queries. Statistics is not
// implemented (Unimplemented, as the generated default).
//
// TLS is mutual when a CA is given: nodes present a certificate signed by
// it (Calico's felix uses its Typha client certificate), the aggregator
// its server certificate. A node's identity for dropping repeated flows
// after a reconnection is its certificate's common name, or its IP
// without TLS.
package server
