// Package storefuzz holds the fuzz target of felix's read path: arbitrary
// stored bytes through etcd decoding, the watch syncer, and calc + rules
// (fuzz_test.go). It has no non-test code.
package storefuzz
