package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-dev/gantry/internal/sim/run"
)

// newSimOracleCommand is the floor's oracle, which `gantry sim run` starts as a process
// of its own so that its CPU time can be measured apart (docs/sim.md, "The floor").
func newSimOracleCommand() *cobra.Command {
	var (
		kubeconfig, githubURL, pool string
		workers                     int
	)
	cmd := &cobra.Command{
		Use:    "oracle",
		Short:  "Serve the floor's jobs, read as ids on standard input (started by gantry sim run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, name, ok := strings.Cut(pool, "/")
			if !ok || ns == "" || name == "" {
				return fmt.Errorf("--pool %q: want NAMESPACE/NAME", pool)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			res, err := run.ServeOracle(cmd.Context(), run.OracleOptions{
				Kube: cfg, GitHubURL: githubURL, Pool: types.NamespacedName{Namespace: ns, Name: name}, Workers: workers,
			}, os.Stdin)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster")
	fl.StringVar(&githubURL, "github-url", "", "the GitHub simulator's REST base URL")
	fl.StringVar(&pool, "pool", "", "the pool served, NAMESPACE/NAME")
	fl.IntVar(&workers, "workers", 64, "jobs served at once")
	for _, f := range []string{"kubeconfig", "github-url", "pool"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}
