//go:build privileged && integration && race

package e2e

// raceEnabled: this test binary was built with -race.
const raceEnabled = true
