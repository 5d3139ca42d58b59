// Command installdocs writes, from the code, what each way of installing Gantry creates
// and which rights it binds to the controller: it renders config/default,
// config/namespaced and the Helm chart (with the helm and kustomize pinned in
// hack/helm/go.mod), reads every RoleBinding and ClusterRoleBinding of the controller's
// ServiceAccount, and writes the result into the docs between markers:
//
//	<!-- BEGIN GENERATED installdocs:NAME (make generate) -->
//	…
//	<!-- END GENERATED installdocs:NAME -->
//
// docs/install.md holds the sections "objects" (what each install creates) and
// "rights" (what it grants, and where); charts/gantry/README.md holds "namespaced"
// (what an install with watchNamespaces still creates and grants beyond its
// namespaces). `make generate` runs it and `make verify` fails when the checked-in text
// differs, so the docs follow config/rbac and the chart without a hand edit.
//
//	go run ./hack/installdocs
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintf(os.Stderr, "installdocs: %v\n", err)
		os.Exit(1)
	}
}

func run(root string) error {
	r := newRenderer(root)
	defer r.close()
	var rendered []renderedInstall
	for _, in := range installs {
		objs, err := in.render(r)
		if err != nil {
			return fmt.Errorf("rendering %s: %w", in.title, err)
		}
		rights, err := boundRights(objs)
		if err != nil {
			return fmt.Errorf("%s: %w", in.title, err)
		}
		rendered = append(rendered, renderedInstall{install: in, objs: objs, rights: rights})
	}
	noHooks, err := r.helm(namespacedValues("--set", "containerHooks.enabled=false")...)
	if err != nil {
		return fmt.Errorf("rendering the chart with watchNamespaces and containerHooks.enabled=false: %w", err)
	}
	sections := map[string]map[string]string{
		"docs/install.md": {
			"objects": objectsSection(rendered),
			"rights":  rightsSection(rendered),
		},
		"charts/gantry/README.md": {
			"namespaced": namespacedSection(rendered[namespacedChart], noHooks),
		},
	}
	for file, secs := range sections {
		path := filepath.Join(root, file)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, err := splice(string(b), secs)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if out != string(b) {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil { //nolint:gosec // a documentation file, world-readable like the rest of the repository
				return err
			}
		}
	}
	return nil
}
