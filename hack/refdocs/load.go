package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Package is what the reference is written from: the API package's types and the
// constants of its named string types.
type Package struct {
	// Doc is the package's doc comment, markers removed.
	Doc string
	// Group is the +groupName marker of the package.
	Group string
	// Version is the package's directory name (v1alpha1).
	Version string
	Types   map[string]*Type
	// Order is the types' names in source order (files sorted by name).
	Order []string
	// ConstGroups are the groups of untyped string constants (condition types,
	// reasons, labels), each with its doc comment, in source order.
	ConstGroups []ConstGroup
}

// ConstGroup is one const ( ... ) block of untyped string constants.
type ConstGroup struct {
	Doc    string
	Values []Value
}

// Type is one named type of the package.
type Type struct {
	Name    string
	Doc     string
	Markers []Marker
	// Fields of a struct type; nil for other types.
	Fields []*Field
	// Struct reports whether the type is a struct.
	Struct bool
	// Underlying is the Go expression of a non-struct type's underlying type.
	Underlying ast.Expr
	// Values are the constants declared with this type, in source order.
	Values []Value
}

// Field is one field of a struct type.
type Field struct {
	// JSON is the field's JSON name; empty for an inlined embedded field.
	JSON    string
	Inline  bool
	Doc     string
	Markers []Marker
	Type    ast.Expr
}

// Value is a constant of a named type.
type Value struct {
	Name  string
	Value string
	Doc   string
}

// Marker is one "+name:args" line of a doc comment.
type Marker struct {
	// Name is the marker without its leading '+' and without its arguments:
	// "kubebuilder:validation:XValidation", "kubebuilder:default", "optional".
	Name string
	// Value is the text after '=' for markers like +kubebuilder:default=10 or
	// +listType=set; Args are the key=value arguments of markers like
	// +kubebuilder:printcolumn:name="Queued",type=integer.
	Value string
	Args  []Arg
}

// Arg is one key=value argument of a marker.
type Arg struct{ Key, Value string }

// Arg returns the value of the argument key, and whether it is there.
func (m Marker) Arg(key string) (string, bool) {
	for _, a := range m.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Has reports whether markers include one named name.
func Has(markers []Marker, name string) bool {
	for _, m := range markers {
		if m.Name == name {
			return true
		}
	}
	return false
}

// Find returns the markers named name.
func Find(markers []Marker, name string) []Marker {
	var out []Marker
	for _, m := range markers {
		if m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

// Load parses the Go files of dir (tests and generated files excluded).
func Load(dir string) (*Package, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
			continue
		}
		files = append(files, n)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	pkg := &Package{Types: map[string]*Type{}, Version: filepath.Base(dir)}
	fset := token.NewFileSet()
	var consts []*ast.GenDecl
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Doc != nil {
			doc, markers, err := splitComment(f.Doc)
			if err != nil {
				return nil, fmt.Errorf("%s: package comment: %w", name, err)
			}
			if doc != "" {
				pkg.Doc = doc
			}
			for _, m := range markers {
				if m.Name == "groupName" {
					pkg.Group = m.Value
				}
			}
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					t, err := loadType(gd, ts)
					if err != nil {
						return nil, fmt.Errorf("%s: type %s: %w", name, ts.Name.Name, err)
					}
					pkg.Types[t.Name] = t
					pkg.Order = append(pkg.Order, t.Name)
				}
			case token.CONST:
				consts = append(consts, gd)
			}
		}
	}
	for _, gd := range consts {
		if g, ok, err := untypedStrings(gd); err != nil {
			return nil, err
		} else if ok {
			pkg.ConstGroups = append(pkg.ConstGroups, g)
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok || pkg.Types[id.Name] == nil || len(vs.Values) != len(vs.Names) {
				continue
			}
			t := pkg.Types[id.Name]
			doc, _, err := splitComment(vs.Doc)
			if err != nil {
				return nil, err
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, err
				}
				t.Values = append(t.Values, Value{Name: n.Name, Value: v, Doc: doc})
			}
		}
	}
	if pkg.Group == "" {
		return nil, errors.New("the package comment has no +groupName marker")
	}
	return pkg, nil
}

// untypedStrings reads a documented const block whose constants are all untyped string
// literals.
func untypedStrings(gd *ast.GenDecl) (ConstGroup, bool, error) {
	doc, _, err := splitComment(gd.Doc)
	if err != nil || doc == "" {
		return ConstGroup{}, false, err
	}
	g := ConstGroup{Doc: doc}
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		if vs.Type != nil || len(vs.Values) != len(vs.Names) {
			return ConstGroup{}, false, nil
		}
		vdoc, _, err := splitComment(vs.Doc)
		if err != nil {
			return ConstGroup{}, false, err
		}
		for i, n := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return ConstGroup{}, false, nil
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return ConstGroup{}, false, err
			}
			g.Values = append(g.Values, Value{Name: n.Name, Value: v, Doc: vdoc})
		}
	}
	return g, len(g.Values) > 0, nil
}

func loadType(gd *ast.GenDecl, ts *ast.TypeSpec) (*Type, error) {
	cg := ts.Doc
	if cg == nil && len(gd.Specs) == 1 {
		cg = gd.Doc
	}
	doc, markers, err := splitComment(cg)
	if err != nil {
		return nil, err
	}
	t := &Type{Name: ts.Name.Name, Doc: doc, Markers: markers}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		t.Underlying = ts.Type
		return t, nil
	}
	t.Struct = true
	for _, f := range st.Fields.List {
		fd, fm, err := splitComment(f.Doc)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", fieldName(f), err)
		}
		field := &Field{Doc: fd, Markers: fm, Type: f.Type}
		if f.Tag != nil {
			tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`"))
			name, opts, _ := strings.Cut(tag.Get("json"), ",")
			field.JSON = name
			field.Inline = strings.Contains(","+opts+",", ",inline,")
		}
		if field.JSON == "-" || (f.Tag == nil && len(f.Names) > 0 && !f.Names[0].IsExported()) {
			continue // not serialized: neither in the API nor in its reference
		}
		t.Fields = append(t.Fields, field)
	}
	return t, nil
}

func fieldName(f *ast.Field) string {
	if len(f.Names) > 0 {
		return f.Names[0].Name
	}
	return exprString(f.Type)
}

// splitComment separates a doc comment's prose from its +marker lines.
func splitComment(cg *ast.CommentGroup) (string, []Marker, error) {
	if cg == nil {
		return "", nil, nil
	}
	var prose []string
	var markers []Marker
	for _, c := range cg.List {
		text := c.Text
		switch {
		case strings.HasPrefix(text, "//"):
			text = strings.TrimPrefix(text, "//")
		case strings.HasPrefix(text, "/*"):
			text = strings.TrimSuffix(strings.TrimPrefix(text, "/*"), "*/")
		}
		for _, line := range strings.Split(text, "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "+") {
				m, err := ParseMarker(trimmed)
				if err != nil {
					return "", nil, err
				}
				markers = append(markers, m)
				continue
			}
			prose = append(prose, strings.TrimPrefix(line, " "))
		}
	}
	return strings.TrimSpace(strings.Join(prose, "\n")), markers, nil
}
