// Package archtest checks, with go test, rules of the house that the
// compiler does not: no mutable package-level wiring (an exported package
// variable is assigned only in a main package or a test) and the
// dependency direction of ../shared/STYLE.md where it crosses folders
// (api/ and lib/ import nothing of ours above them; the test harness in
// internal/ is imported only by tests, hack/, lab/ and test/). It reads
// the source (go/ast), every file whatever its build tags, and has no
// code of its own.
package archtest
