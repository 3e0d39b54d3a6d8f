package v3

import "fmt"

// CheckUserWrite refuses a user's write of a read-only kind (see
// KindInfo.ReadOnly) with the error Calico's calicoctl prints. op names
// the user's verb as Calico words it: "create or apply" (create, and
// apply of a new object), "apply or replace" (replace, and apply of an
// existing one) or "delete".
func CheckUserWrite(kind, op string) error {
	if k, ok := LookupKind(kind); ok && k.ReadOnly {
		return fmt.Errorf("operation %s is not supported on %s", op, k.Kind)
	}
	return nil
}
