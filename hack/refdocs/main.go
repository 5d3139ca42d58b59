// Command refdocs writes Gantry's API reference (docs/reference/api.md) from the Go types
// in api/v1alpha1: each kind's and field's doc comment, the kubebuilder markers
// (defaults, validation, printer columns, short names) and the CEL rules with the
// messages the API server answers with. `make generate` runs it; `make verify` then fails
// when the checked-in reference is stale.
//
//	go run ./hack/refdocs -api api/v1alpha1 -out docs/reference/api.md
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	apiDir := flag.String("api", "api/v1alpha1", "directory of the API package")
	out := flag.String("out", "docs/reference/api.md", "file to write (- for standard output)")
	kinds := flag.String("kinds", "RunnerPool,Runner", "kinds in the order they are documented; other kinds follow alphabetically")
	flag.Parse()

	pkg, err := Load(*apiDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "refdocs: %v\n", err)
		os.Exit(1)
	}
	doc, err := Render(pkg, strings.Split(*kinds, ","))
	if err != nil {
		fmt.Fprintf(os.Stderr, "refdocs: %v\n", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(doc)
	} else {
		err = os.WriteFile(*out, doc, 0o644) //nolint:gosec // a documentation file, world-readable like the rest of the repository
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "refdocs: %v\n", err)
		os.Exit(1)
	}
}
