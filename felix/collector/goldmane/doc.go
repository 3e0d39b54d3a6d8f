// Package goldmane sends felix's flows to a Goldmane aggregator
// (FlowLogsGoldmaneServer) over gRPC, as Calico's felix does: Calico's
// FlowCollector.Connect stream, one receipt per flow, mutual TLS with the
// certificate Calico's felix uses as a client (TyphaCertFile, TyphaKeyFile,
// TyphaCAFile).
//
// The collector hands each flush to Client.Push, which never blocks: the
// flows wait in a bounded queue (a full queue drops the newest and counts
// them), and one goroutine (Client.Run) connects, reconnects with backoff,
// and sends them. A flow sent without its receipt is sent again after a
// reconnection (the aggregator drops the repeat).
package goldmane
