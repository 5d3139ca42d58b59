package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/version"
)

func TestVersionPrintsStampedVersion(t *testing.T) {
	old := version.Version
	version.Version = "v9.8.7"
	t.Cleanup(func() { version.Version = old })

	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "gantry v9.8.7 (commit ") {
		t.Errorf("version printed %q", out.String())
	}

	out.Reset()
	root = newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var info version.Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("version --json printed %q: %v", out.String(), err)
	}
	if info.Version != "v9.8.7" || info.GoVersion == "" || info.Platform == "" {
		t.Errorf("version --json = %+v", info)
	}
}
