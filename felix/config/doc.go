// Package config is felix's configuration: one table (table.go) of every
// setting Calico's felix has (its FELIX_* environment variables, the keys
// of /etc/calico/felix.cfg and every FelixConfigurationSpec field), each
// with Calico's type, default and parsing, and what Tabby does with it:
// honoured (applied live or at the next start), or refused when set to a
// value Tabby does not implement, with the reason and what runs instead.
// Refused settings that change security or isolation are marked Security
// (WireGuard, eBPF, ...): felix is not ready while one is set, and
// calicoctl refuses to write one without --allow-unsupported (Refusals
// gives it the table's verdict on a spec). Making a setting honoured is
// one edit of its table entry.
//
// Resolve merges the sources with Calico's precedence: environment, then
// the config file, then the node's FelixConfiguration ("node.<name>"),
// then the global one ("default"), then the defaults. Like Calico, an
// empty value is ignored, "none" is the zero value, names are
// case-insensitive, local-only settings (datastore connection, Typha) are
// ignored when they come from the datastore, and a value that does not
// parse falls back to the default unless the setting is one Calico dies
// on (ChainInsertMode, IptablesMarkMask, LogFilePath, ...), which is then
// a fatal error. Every refusal and fallback is returned as a Problem for
// the caller to log, count and show. It is pure: no I/O but reading the
// config file (LoadFile).
package config
