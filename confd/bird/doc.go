// Package bird is confd's edge towards a running BIRD 2 daemon: it swaps a
// rendered configuration in safely and reloads it.
//
// Driver.Apply writes the new text next to the live file, validates it with
// `bird -p -c`, renames it over the live file (atomic) and runs
// `birdc configure`. If validation or the reload fails, the previous file is
// put back and BIRD keeps running its previous configuration; the returned
// *ConfigError carries BIRD's own `file:line:col message`.
//
// The BIRD processes are reached through the small Control interface: Exec
// (control_linux.go) runs the real binaries, birdtest.Fake scripts failures
// for unit tests.
package bird
