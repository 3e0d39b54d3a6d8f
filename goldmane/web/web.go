package web

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/store"
)

//go:embed static
var static embed.FS

// Hit is a policy hit as the page shows it.
type Hit struct {
	Kind      string `json:"kind"`
	Tier      string `json:"tier"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Action    string `json:"action"`
	Rule      int64  `json:"rule"`
}

// Flow is a flow result as the page shows it.
type Flow struct {
	ID         int64  `json:"id"`
	Start      int64  `json:"start"`
	End        int64  `json:"end"`
	SrcNS      string `json:"src_ns"`
	Src        string `json:"src"`
	SrcType    string `json:"src_type"`
	DstNS      string `json:"dst_ns"`
	Dst        string `json:"dst"`
	DstType    string `json:"dst_type"`
	Port       int64  `json:"port"`
	Proto      string `json:"proto"`
	Reporter   string `json:"reporter"`
	Action     string `json:"action"`
	Enforced   []Hit  `json:"enforced"`
	Pending    []Hit  `json:"pending"`
	PacketsIn  int64  `json:"packets_in"`
	PacketsOut int64  `json:"packets_out"`
	BytesIn    int64  `json:"bytes_in"`
	BytesOut   int64  `json:"bytes_out"`
	// Trace is the calicoctl command explaining a denied flow, "" when
	// an end has no name calicoctl takes (a network or a network set:
	// the flow does not carry its IP).
	Trace string `json:"trace,omitempty"`
}

// View turns a result into the page's form.
func View(r *proto.FlowResult) Flow {
	f, k := r.GetFlow(), r.GetFlow().GetKey()
	v := Flow{ID: r.GetId(), Start: f.StartTime, End: f.EndTime,
		SrcNS: k.SourceNamespace, Src: k.SourceName, SrcType: typeName(k.SourceType),
		DstNS: k.DestNamespace, Dst: k.DestName, DstType: typeName(k.DestType),
		Port: k.DestPort, Proto: k.Proto, Reporter: k.Reporter.String(), Action: k.Action.String(),
		Enforced: hits(k.GetPolicies().GetEnforcedPolicies()), Pending: hits(k.GetPolicies().GetPendingPolicies()),
		PacketsIn: f.PacketsIn, PacketsOut: f.PacketsOut, BytesIn: f.BytesIn, BytesOut: f.BytesOut}
	if k.Action == proto.Action_Deny {
		v.Trace = TraceCommand(k)
	}
	return v
}

func typeName(t proto.EndpointType) string {
	switch t {
	case proto.EndpointType_WorkloadEndpoint:
		return "wep"
	case proto.EndpointType_HostEndpoint:
		return "hep"
	case proto.EndpointType_NetworkSet:
		return "ns"
	case proto.EndpointType_Network:
		return "net"
	}
	return ""
}

func hits(hs []*proto.PolicyHit) []Hit {
	out := make([]Hit, 0, len(hs))
	for _, h := range hs {
		out = append(out, Hit{Kind: store.ShortKind(h.Kind), Tier: h.Tier, Namespace: h.Namespace, Name: h.Name,
			Action: h.Action.String(), Rule: h.RuleIndex})
	}
	return out
}

// TraceCommand is `calicoctl policy trace` for the flow's ends, or ""
// when an end has no name calicoctl takes.
func TraceCommand(k *proto.FlowKey) string {
	end := func(t proto.EndpointType, ns, name string) string {
		switch t {
		case proto.EndpointType_WorkloadEndpoint:
			return ns + "/" + name
		case proto.EndpointType_HostEndpoint:
			return "hostendpoint/" + name
		}
		return ""
	}
	from, to := end(k.SourceType, k.SourceNamespace, k.SourceName), end(k.DestType, k.DestNamespace, k.DestName)
	if from == "" || to == "" {
		return ""
	}
	port := strings.ToLower(k.Proto)
	if k.DestPort != 0 {
		port = fmt.Sprintf("%s/%d", port, k.DestPort)
	}
	return fmt.Sprintf("calicoctl policy trace --from %s --to %s --port %s", from, to, port)
}

// Handler serves the page and its API over st.
func Handler(st *store.Store, now func() time.Time) http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(static, "static")
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /api/flows", func(w http.ResponseWriter, r *http.Request) {
		res := st.List(&proto.FlowListRequest{}, now())
		out := make([]Flow, 0, len(res.Flows))
		for _, f := range res.Flows {
			out = append(out, View(f))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api/hints", func(w http.ResponseWriter, r *http.Request) {
		t, ok := map[string]proto.FilterType{
			"source_namespace": proto.FilterType_FilterTypeSourceNamespace, "dest_namespace": proto.FilterType_FilterTypeDestNamespace,
			"policy": proto.FilterType_FilterTypePolicyName, "tier": proto.FilterType_FilterTypePolicyTier,
		}[r.URL.Query().Get("type")]
		if !ok {
			http.Error(w, "type: one of source_namespace, dest_namespace, policy, tier", http.StatusBadRequest)
			return
		}
		var vals []string
		for _, h := range st.FilterHints(&proto.FilterHintsRequest{Type: t}, now()).Hints {
			vals = append(vals, h.Value)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(vals)
	})
	mux.HandleFunc("GET /api/stream", func(w http.ResponseWriter, r *http.Request) { stream(w, r, st) })
	return mux
}

// stream sends each interval's changed flows as a server-sent event
// (a JSON array of Flow) until the client goes or falls behind.
func stream(w http.ResponseWriter, r *http.Request, st *store.Store) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	sub, _ := st.Subscribe(nil, 0)
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, ": connected\n\n")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case rs, ok := <-sub.C:
			if !ok {
				return
			}
			out := make([]Flow, 0, len(rs))
			for _, f := range rs {
				out = append(out, View(f))
			}
			b, _ := json.Marshal(out)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
