package v1alpha1

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// Tolerant decoding. The API server can hold a RunnerPool or a Runner this version of
// Gantry cannot decode: one stored before a validation rule existed (a recovery
// duration such as "600" or "10 minutes"), or written by a newer version. Failing the
// decode would fail the informer's whole list — every pool would stop, and a restarted
// controller would never sync its cache. Instead such an object decodes with its
// metadata and every field that does decode; its DecodeError field names the fields that do not,
// and the controllers report it on the object and leave it alone.

// UnmarshalJSON decodes a RunnerPool; what cannot be decoded is left at its zero value
// and named by its DecodeError field.
func (p *RunnerPool) UnmarshalJSON(data []byte) error {
	type plain RunnerPool
	var whole plain
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &whole); err == nil {
		*p = RunnerPool(whole)
		return nil
	}
	var out RunnerPool
	problems, err := decodeParts(data, &out.TypeMeta, &out.ObjectMeta,
		part{"spec", &out.Spec, func() any { return &RunnerPoolSpec{} }},
		part{"status", &out.Status, func() any { return &RunnerPoolStatus{} }})
	if err != nil {
		return err
	}
	out.DecodeError = problems
	*p = out
	return nil
}

// UnmarshalJSON decodes a Runner; what cannot be decoded is left at its zero value and
// named by DecodeError.
func (r *Runner) UnmarshalJSON(data []byte) error {
	type plain Runner
	var whole plain
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &whole); err == nil {
		*r = Runner(whole)
		return nil
	}
	var out Runner
	problems, err := decodeParts(data, &out.TypeMeta, &out.ObjectMeta,
		part{"spec", &out.Spec, func() any { return &RunnerSpec{} }},
		part{"status", &out.Status, func() any { return &RunnerStatus{} }})
	if err != nil {
		return err
	}
	out.DecodeError = problems
	*r = out
	return nil
}

// part is a top-level field of an object (spec, status), where to decode it and how to
// make an empty one to try fields on.
type part struct {
	name  string
	into  any
	empty func() any
}

// decodeParts decodes the type and object metadata, which must decode, and each part
// field by field: a field that fails is tried one level down (spec.recovery's
// pendingTimeout apart from its nodeLostTimeout), and what still fails is left out and
// described in the returned text.
func decodeParts(data []byte, tm *metav1.TypeMeta, om *metav1.ObjectMeta, parts ...part) (string, error) {
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, tm); err != nil {
		return "", err
	}
	var top map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &top); err != nil {
		return "", err
	}
	if raw, ok := top["metadata"]; ok {
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, om); err != nil {
			return "", fmt.Errorf("decoding metadata: %w", err)
		}
	}
	var problems []string
	for _, p := range parts {
		raw, ok := top[p.name]
		if !ok {
			continue
		}
		var fields map[string]json.RawMessage
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &fields); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p.name, err))
			continue
		}
		good, bad := goodFields(fields, p.empty, p.name, 2)
		problems = append(problems, bad...)
		b, err := json.Marshal(good)
		if err != nil {
			return "", err
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(b, p.into); err != nil {
			// The fields decoded one by one but not together: leave the part empty.
			reflect.ValueOf(p.into).Elem().SetZero()
			problems = append(problems, fmt.Sprintf("%s: %v", p.name, err))
		}
	}
	if len(problems) == 0 {
		problems = []string{"the object could not be decoded"}
	}
	return strings.Join(problems, "; "), nil
}

// goodFields returns the fields that decode into a fresh value from empty, trying an
// object-valued field that does not decode field by field, down to depth levels, and
// describes those that do not.
func goodFields(fields map[string]json.RawMessage, empty func() any, path string, depth int) (map[string]json.RawMessage, []string) {
	good := map[string]json.RawMessage{}
	var bad []string
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		one, _ := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		err := kjson.UnmarshalCaseSensitivePreserveInts(one, empty())
		if err == nil {
			good[k] = fields[k]
			continue
		}
		var sub map[string]json.RawMessage
		if depth > 1 && kjson.UnmarshalCaseSensitivePreserveInts(fields[k], &sub) == nil && len(sub) > 0 {
			wrap := func() any { return &nested{empty: empty, key: k} }
			subGood, subBad := goodFields(sub, wrap, path+"."+k, depth-1)
			bad = append(bad, subBad...)
			if len(subGood) > 0 {
				b, _ := json.Marshal(subGood)
				good[k] = b
			}
			continue
		}
		bad = append(bad, fmt.Sprintf("%s.%s: %v", path, k, err))
	}
	return good, bad
}

// nested decodes {"k": X} into a fresh value from empty: it lets goodFields try the
// fields of an object-valued field one at a time.
type nested struct {
	empty func() any
	key   string
}

func (n *nested) UnmarshalJSON(data []byte) error {
	b, _ := json.Marshal(map[string]json.RawMessage{n.key: data})
	return kjson.UnmarshalCaseSensitivePreserveInts(b, n.empty())
}
