// Package netconf parses the `calico` CNI plugin's network configuration
// exactly as Calico's plugin reads it (same JSON keys, same defaults), and
// the CNI_ARGS the runtime passes, validating both into errors that carry
// CNI error codes and name the offending field. Pure: no I/O beyond the
// optional nodename file.
package netconf
