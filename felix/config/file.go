package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// DefaultFile is Calico's felix configuration file.
const DefaultFile = "/etc/calico/felix.cfg"

// LoadFile reads felix's INI configuration file ("[global]" and other
// sections; "key = value" or "key: value"; "#" and ";" comments), keys
// of all sections merged as Calico does. A missing file is no error.
func LoadFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading felix's config file: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || (line[0] == '[' && strings.HasSuffix(line, "]")) {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("%s:%d: %q is not key = value", path, n, line)
		}
		v := strings.TrimSpace(line[i+1:])
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"') {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(line[:i])] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// EnvFrom picks the FELIX_* variables of an environment ("K=V" entries),
// without the prefix.
func EnvFrom(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && len(k) > 6 && strings.EqualFold(k[:6], "FELIX_") {
			out[k[6:]] = v
		}
	}
	return out
}
