package etcd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// resolveEndpoints returns the configured endpoints, or those the
// discovery domain's SRV records list: _etcd-client-ssl._tcp.<domain>
// (https) first, then _etcd-client._tcp.<domain> (http), as etcd's own
// discovery does.
func resolveEndpoints(cfg Config) ([]string, error) {
	var eps []string
	for _, e := range cfg.Endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	switch {
	case len(eps) > 0 && cfg.DiscoverySrv != "":
		return nil, errors.New("etcd datastore: etcdEndpoints and etcdDiscoverySrv are both set: use one")
	case len(eps) > 0:
		return eps, nil
	case cfg.DiscoverySrv == "":
		return nil, errors.New("etcd datastore: no endpoints configured (set etcd_endpoints / ETCD_ENDPOINTS, or etcdDiscoverySrv / ETCD_DISCOVERY_SRV)")
	}
	lookup := cfg.LookupSRV
	if lookup == nil {
		lookup = net.LookupSRV
	}
	var errs []error
	for _, s := range []struct{ service, scheme string }{{"etcd-client-ssl", "https"}, {"etcd-client", "http"}} {
		_, addrs, err := lookup(s.service, "tcp", cfg.DiscoverySrv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, a := range addrs {
			host := strings.TrimSuffix(a.Target, ".")
			eps = append(eps, s.scheme+"://"+net.JoinHostPort(host, strconv.Itoa(int(a.Port))))
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("etcd datastore: no _etcd-client-ssl._tcp or _etcd-client._tcp SRV records for etcdDiscoverySrv %q: %w", cfg.DiscoverySrv, errors.Join(errs...))
	}
	return eps, nil
}
