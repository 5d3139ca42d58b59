// Command crddesc keeps Gantry's own field descriptions in its CRDs and drops those of
// the embedded pod template. controller-gen's maxDescLen applies to the whole CRD: at 0,
// `kubectl explain runnerpool.spec` shows no documentation at all; unlimited, the
// template's copy of the Kubernetes pod documentation makes the CRD too large for a
// client-side `kubectl apply` (its last-applied annotation holds at most 256 KiB).
// `make generate` runs it on the CRDs controller-gen wrote:
//
//	go run ./hack/crddesc config/crd/bases/*.yaml
//
// Beneath each field named by -under (a path of property names from the schema's root),
// every description is removed; the field's own description stays.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

func main() {
	under := flag.String("under", "spec.template", "comma-separated property paths whose subtrees lose their descriptions")
	flag.Parse()
	var paths [][]string
	for _, p := range strings.Split(*under, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, strings.Split(p, "."))
		}
	}
	for _, file := range flag.Args() {
		if err := trimFile(file, paths); err != nil {
			fmt.Fprintf(os.Stderr, "crddesc: %s: %v\n", file, err)
			os.Exit(1)
		}
	}
}

func trimFile(file string, paths [][]string) error {
	in, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := trim(in, paths)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}

// trim returns the CRD document in with the descriptions beneath each path removed, in
// controller-gen's layout (a leading "---", two-space indentation).
func trim(in []byte, paths [][]string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("want one YAML document, found %d", len(doc.Content))
	}
	versions := lookup(doc.Content[0], "spec", "versions")
	if versions == nil || versions.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("no spec.versions: not a CustomResourceDefinition")
	}
	for _, v := range versions.Content {
		root := lookup(v, "schema", "openAPIV3Schema")
		for _, p := range paths {
			node := root
			for _, name := range p {
				node = lookup(node, "properties", name)
			}
			if node != nil {
				for _, child := range subschemas(node) {
					dropDescriptions(child)
				}
			}
		}
	}
	var buf bytes.Buffer
	buf.WriteString("---\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc.Content[0]); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// lookup follows mapping keys from node; nil when one is missing.
func lookup(node *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if node == nil || node.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == k {
				next = node.Content[i+1]
				break
			}
		}
		node = next
	}
	return node
}

// subschemas are the schemas nested in a schema: its properties, items,
// additionalProperties and the branches of allOf, anyOf, oneOf and not.
func subschemas(schema *yaml.Node) []*yaml.Node {
	if schema == nil || schema.Kind != yaml.MappingNode {
		return nil
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(schema.Content); i += 2 {
		key, val := schema.Content[i].Value, schema.Content[i+1]
		switch key {
		case "properties":
			if val.Kind == yaml.MappingNode {
				for j := 1; j < len(val.Content); j += 2 {
					out = append(out, val.Content[j])
				}
			}
		case "items", "additionalProperties", "not":
			out = append(out, val)
		case "allOf", "anyOf", "oneOf":
			out = append(out, val.Content...)
		}
	}
	return out
}

// dropDescriptions removes the description of a schema and of every schema in it.
func dropDescriptions(schema *yaml.Node) {
	if schema == nil || schema.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(schema.Content); i += 2 {
		if schema.Content[i].Value == "description" {
			schema.Content = append(schema.Content[:i], schema.Content[i+2:]...)
			break
		}
	}
	for _, child := range subschemas(schema) {
		dropDescriptions(child)
	}
}
