// Package numorstring holds the small value types of Calico's API that are
// written either as a number or as a string in YAML: ports (a number, a
// "min:max" range or a named port), protocols (a name or a number) and AS
// numbers (plain or dotted "high.low"). Pure; no dependencies.
package numorstring
