// Package lib holds, in its subpackages, small helpers shared by the
// components' wiring (felix, kube-controllers, ...): pprofmux (the debug
// ports' profiling handlers) and calicolog (Calico's log line format).
// They import nothing of this module, only the standard library and
// third-party modules, so every layer may use them without an arrow
// running back up (internal/ is the test harness, which imports the
// components; the components never import it). The rule is checked by
// internal/archtest.
package lib
