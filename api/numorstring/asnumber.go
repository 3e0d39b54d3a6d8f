package numorstring

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ASNumber is a BGP AS number. YAML accepts a plain number (64512), the
// same as a string ("64512"), or the dotted form "high.low" (RFC 5396).
// It is always written as a number, and Calico's CRDs declare it an
// integer (so a custom resource holding a string is refused by the API
// server, as on a Calico cluster).
type ASNumber uint32

// ASNumberFromString parses "64512" or "1.10".
func ASNumberFromString(s string) (ASNumber, error) {
	if hi, lo, ok := strings.Cut(s, "."); ok {
		h, err1 := strconv.ParseUint(hi, 10, 16)
		l, err2 := strconv.ParseUint(lo, 10, 16)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("%q is not a dotted AS number (two numbers 0-65535)", s)
		}
		return ASNumber(h<<16 | l), nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not an AS number (0-4294967295 or dotted high.low)", s)
	}
	return ASNumber(n), nil
}

// String renders the plain form.
func (a ASNumber) String() string { return strconv.FormatUint(uint64(a), 10) }

// UnmarshalJSON accepts a number or a string form.
func (a *ASNumber) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ASNumberFromString(s)
		if err != nil {
			return err
		}
		*a = v
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("AS number must be a number or a string, got %s", b)
	}
	if n < 0 || n > 0xFFFFFFFF {
		return fmt.Errorf("AS number %d is outside 0-4294967295", n)
	}
	*a = ASNumber(n)
	return nil
}
