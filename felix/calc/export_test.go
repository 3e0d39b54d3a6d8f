package calc

// IdleProfileStates counts the Engine's profile states that no local
// endpoint uses and no valid profile has (there should be none).
func IdleProfileStates(e *Engine) int {
	n := 0
	for _, pr := range e.profs {
		if pr.uses == 0 && pr.conv == nil && pr.refd == nil {
			n++
		}
	}
	return n
}
