// Package birdsup runs and supervises BIRD 2 for calico-node. The
// Supervisor is confd's bird.Control: confd validates each configuration
// with `bird -p`, and its first Configure starts BIRD on the file confd
// just put in place (BIRD needs a configuration to start); later ones
// reload the running daemon over its control socket. BIRD runs in the
// foreground as a child (-f), always with -R (graceful restart recovery:
// the kernel routes and the peers' routes of a previous BIRD are kept until
// the sessions converge, as Calico runs it), is restarted with backoff
// when it exits, and is stopped on a planned stop with `graceful restart`,
// so the peers keep its routes (graceful restart helper) and the kernel
// keeps its own (the kernel protocol is `persist`). If calico-node dies,
// BIRD is killed with it (SIGKILL: no Cease, peers keep the routes); a
// BIRD left by a previous instance (its pid file) is killed before a new
// one starts.
package birdsup
