package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/doctor"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/manager"
)

func init() { extraCommands = append(extraCommands, newDoctorCommand) }

type doctorFlags struct {
	pool, namespace, repository, enterprise, output, caBundle string
	controllerNamespace                                       string
	labels                                                    []string
	timeout                                                   time.Duration
}

// errProblems makes the exit status non-zero once the report is printed.
type errProblems struct{ n int }

func (e errProblems) Error() string { return fmt.Sprintf("doctor found %d problem(s)", e.n) }

func newDoctorCommand() *cobra.Command {
	f := &doctorFlags{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say why jobs wait: check each RunnerPool's credentials, GitHub access, runner group, webhooks and routing",
		Long: `For each RunnerPool (or --pool NAMESPACE/NAME): is the credentials Secret found and
complete, does GitHub accept the credentials for the pool's scope, does the runner group
exist and admit the repository (public repositories included), is the pool Ready, and
when did the last webhook delivery arrive and was its signature accepted (GitHub App
credentials). With --repository and --labels, which pool a job routes to and why each
other pool does not. Uses your kubeconfig; exits 1 when it finds a problem.`,
		Example: `  gantry doctor
  gantry doctor --pool ci/linux-x64 --repository my-org/api --labels self-hosted,linux,x64
  gantry doctor -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("finding the cluster (KUBECONFIG, or ~/.kube/config): %w", err)
			}
			kube, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
			if err != nil {
				return fmt.Errorf("connecting to the cluster: %w", err)
			}
			return runDoctor(cmd.Context(), kube, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.pool, "pool", "", "check only this pool, NAMESPACE/NAME")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "check only the pools of this namespace (default: all)")
	fl.StringVar(&f.repository, "repository", "", "a job's repository, OWNER/REPO or https://HOST/OWNER/REPO: route it and check runner groups against it")
	fl.StringSliceVar(&f.labels, "labels", nil, "the job's runs-on labels, comma-separated (with --repository)")
	fl.StringVar(&f.enterprise, "enterprise", "", "the enterprise the repository belongs to, to route to enterprise pools")
	fl.StringVar(&f.controllerNamespace, "controller-namespace", "", "where Gantry's webhook Service is, to check it against the controller's NetworkPolicy (default: every namespace)")
	fl.StringVarP(&f.output, "output", "o", "text", "text or json")
	fl.StringVar(&f.caBundle, "github-ca-bundle", "", "PEM file of extra CA certificates for GitHub Enterprise Server (as the controller's flag)")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long")
	return cmd
}

// runDoctor checks, prints, and returns errProblems when there is a problem.
func runDoctor(ctx context.Context, kube client.Reader, f *doctorFlags, out io.Writer) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("-o %q: want text or json", f.output)
	}
	ghOpts := github.Options{Timeout: 30 * time.Second, UserAgent: "gantry-doctor"}
	if f.caBundle != "" {
		pem, err := os.ReadFile(f.caBundle)
		if err != nil {
			return fmt.Errorf("--github-ca-bundle: %w", err)
		}
		if ghOpts.Transport, err = github.TransportWithCABundle(pem); err != nil {
			return fmt.Errorf("--github-ca-bundle: %w", err)
		}
	}
	o := doctor.Options{
		Kube:                kube,
		Namespace:           f.namespace,
		ControllerNamespace: f.controllerNamespace,
		GitHub: &controller.GitHubResolver{Reader: kube, Clock: clock.RealClock{}, AllowHTTP: true,
			Provider: github.NewProvider(github.ProviderOptions{Options: ghOpts})},
	}
	if f.pool != "" {
		key, err := parseNamespacedName(f.pool)
		if err != nil {
			return fmt.Errorf("--pool: %w", err)
		}
		o.Pool = &key
	}
	if f.repository != "" {
		host, owner, repo, err := doctor.ParseRepository(f.repository)
		if err != nil {
			return err
		}
		o.Job = &doctor.JobQuery{Host: host, Owner: owner, Repo: repo, Labels: trimAll(f.labels), Enterprise: f.enterprise}
	} else if len(f.labels) > 0 {
		return fmt.Errorf("--labels needs --repository: a job is routed by its repository and its labels")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	rep, err := doctor.Run(ctx, o)
	if err != nil {
		return err
	}
	if f.output == "json" {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		return err
	}
	if n := rep.ProblemCount(); n > 0 {
		return errProblems{n: n}
	}
	return nil
}

func trimAll(ls []string) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
