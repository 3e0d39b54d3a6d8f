package health

import (
	"net/http"
	"strings"
	"time"
)

// Handler serves /liveness and /readiness over a: 200 when every
// (selected) component is live / ready, 503 otherwise, with one line per
// component.
func Handler(a *Aggregator) http.Handler {
	mux := http.NewServeMux()
	for _, kind := range []string{"liveness", "readiness"} {
		mux.HandleFunc("/"+kind, func(w http.ResponseWriter, req *http.Request) {
			var names []string
			if c := req.URL.Query().Get("component"); c != "" {
				names = strings.Split(c, ",")
			}
			reports, err := a.Reports(names...)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			ok, text := Summary(reports, kind)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if !ok {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			_, _ = w.Write([]byte(text))
		})
	}
	return mux
}

// NewServer is the health server on addr.
func NewServer(addr string, a *Aggregator) *http.Server {
	return &http.Server{Addr: addr, Handler: Handler(a), ReadHeaderTimeout: 5 * time.Second}
}
