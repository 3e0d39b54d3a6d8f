package v3

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DecodeError says which document of a multi-document input failed to
// decode, and why.
// +kubebuilder:object:generate=false
type DecodeError struct {
	Doc  int    // 1-based position of the document in the input
	Kind string // the document's kind, when it could be read
	Name string // the document's metadata.name, when it could be read
	Err  error
}

func (e *DecodeError) Error() string {
	where := fmt.Sprintf("document %d", e.Doc)
	if e.Kind != "" {
		where += " (" + e.Kind
		if e.Name != "" {
			where += fmt.Sprintf(" %q", e.Name)
		}
		where += ")"
	}
	return where + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrUnknownKind is wrapped by decode errors for a kind this API lacks.
var ErrUnknownKind = errors.New("unknown kind")

// header is the part of a document read before its kind is known.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// DecodeYAML decodes every document of a YAML (or JSON) stream into typed
// resources. Decoding is strict: an unknown field, a duplicate key, a
// missing or foreign apiVersion and an unknown kind are errors. A document of
// kind "List" or "<Kind>List" contributes its items. Empty documents are
// skipped. It neither defaults nor validates.
func DecodeYAML(data []byte) ([]Resource, error) {
	docs, err := DecodeYAMLDocuments(data)
	if err != nil {
		return nil, err
	}
	out := make([]Resource, len(docs))
	for i, d := range docs {
		out[i] = d.Resource
	}
	return out, nil
}

// Decoded is one resource and the 1-based document it came from (items of
// a List share their document's number).
// +kubebuilder:object:generate=false
type Decoded struct {
	Doc      int
	Resource Resource
}

// DecodeYAMLDocuments is DecodeYAML keeping each resource's document number,
// so callers can say where a later validation error comes from.
func DecodeYAMLDocuments(data []byte) ([]Decoded, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Decoded
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, &DecodeError{Doc: doc, Err: err}
		}
		if isEmptyDocument(raw) {
			doc--
			continue
		}
		rs, err := decodeDocument(raw)
		if err != nil {
			var de *DecodeError
			if errors.As(err, &de) {
				de.Doc = doc
				return nil, de
			}
			return nil, &DecodeError{Doc: doc, Err: err}
		}
		for _, r := range rs {
			out = append(out, Decoded{Doc: doc, Resource: r})
		}
	}
}

// DecodeOne decodes a single document into a resource.
func DecodeOne(data []byte) (Resource, error) {
	rs, err := DecodeYAML(data)
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("expected exactly one resource, found %d", len(rs))
	}
	return rs[0], nil
}

func isEmptyDocument(raw []byte) bool {
	for _, line := range strings.Split(string(raw), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

func decodeDocument(raw []byte) ([]Resource, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("not a resource (expected a mapping with apiVersion and kind): %w", err)
	}
	if h.APIVersion == "" {
		return nil, &DecodeError{Kind: h.Kind, Name: h.Metadata.Name, Err: errors.New("apiVersion is required (use projectcalico.org/v3)")}
	}
	if h.APIVersion != GroupVersion {
		return nil, &DecodeError{Kind: h.Kind, Name: h.Metadata.Name, Err: fmt.Errorf("apiVersion %q is not supported (use %s)", h.APIVersion, GroupVersion)}
	}
	if h.Kind == "" {
		return nil, &DecodeError{Name: h.Metadata.Name, Err: errors.New("kind is required")}
	}
	if h.Kind == "List" || (strings.HasSuffix(h.Kind, "List") && isKind(strings.TrimSuffix(h.Kind, "List"))) {
		var out []Resource
		for i, item := range h.Items {
			rs, err := decodeDocument(item)
			if err != nil {
				return nil, &DecodeError{Kind: h.Kind, Err: fmt.Errorf("items[%d]: %w", i, err)}
			}
			out = append(out, rs...)
		}
		return out, nil
	}
	info, ok := LookupKind(h.Kind)
	if !ok {
		return nil, &DecodeError{Kind: h.Kind, Name: h.Metadata.Name, Err: fmt.Errorf("%w %q (known kinds: %s)", ErrUnknownKind, h.Kind, strings.Join(kindNames(), ", "))}
	}
	obj := info.New()
	if err := strictUnmarshalJSON(js, obj); err != nil {
		return nil, &DecodeError{Kind: h.Kind, Name: h.Metadata.Name, Err: err}
	}
	return []Resource{obj}, nil
}

// strictUnmarshalJSON decodes JSON the way the Kubernetes API server does:
// field names are case-sensitive, and unknown or duplicate fields are
// errors that name the field's full path.
func strictUnmarshalJSON(js []byte, into any) error {
	strictErrs, err := kjson.UnmarshalStrict(js, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: cannot use a %s here (expected %s)", te.Field, te.Value, te.Type)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = strings.TrimPrefix(e.Error(), "json: ")
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

func isKind(k string) bool { _, ok := LookupKind(k); return ok }

func kindNames() []string {
	ks := Kinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.Kind
	}
	return names
}

// EncodeJSON renders a resource as JSON with its TypeMeta set and without
// the empty creationTimestamp Kubernetes' metadata type would add.
func EncodeJSON(r Resource) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, err
	}
	if _, ok := m["apiVersion"]; !ok {
		m["apiVersion"] = GroupVersion
	}
	if _, ok := m["kind"]; !ok {
		m["kind"] = KindOf(r)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if ts, present := md["creationTimestamp"]; present && ts == nil {
			delete(md, "creationTimestamp")
		}
	}
	return json.Marshal(m)
}

// EncodeYAML renders resources as a multi-document YAML stream.
func EncodeYAML(rs ...Resource) ([]byte, error) {
	var buf bytes.Buffer
	for i, r := range rs {
		js, err := EncodeJSON(r)
		if err != nil {
			return nil, err
		}
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// KindOf returns the kind of r: its TypeMeta kind, or else the registered
// kind of its Go type (for objects built in code without TypeMeta).
func KindOf(r Resource) string {
	if k := r.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	want := fmt.Sprintf("%T", r)
	for _, k := range Kinds() {
		if fmt.Sprintf("%T", k.New()) == want {
			return k.Kind
		}
	}
	return ""
}

// DefaultAndValidate fills defaults and validates, returning the errors as
// one error (nil when valid).
func DefaultAndValidate(r Resource) error {
	r.Default()
	errs := r.Validate()
	errs.Extend(WriteRules(r))
	return errs.Err()
}
