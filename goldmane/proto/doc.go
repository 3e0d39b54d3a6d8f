// Package proto is the Goldmane API (generated from api.proto by `make
// generate`): Calico's package goldmane, services Flows, FlowCollector and
// Statistics, with Calico's message and field names, so Calico's clients
// and Tabby's aggregator understand each other.
package proto
