// Command gantry runs GitHub Actions self-hosted runners as ephemeral pods on
// Kubernetes. This file is the composition root only: each subcommand lives in its
// own file and builds its dependencies there.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "gantry",
		Short:         "Ephemeral, just-in-time GitHub Actions runners on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands are registered by the other files of this package (sim, controller),
// each in its own init, so that adding a subcommand touches only its own file.
var extraCommands []func() *cobra.Command
