// Package doctor answers "my job waits and no runner appears": for each RunnerPool it
// checks, in the order a job needs them, that the credentials Secret is found and
// complete, that GitHub accepts the credentials for the pool's scope, that the runner
// group exists and admits the repository (public repositories included), that the
// credentials may re-run jobs where the pool re-runs those the infrastructure killed,
// that the controller has the pool Ready, what GitHub's delivery log says of the last webhook
// deliveries, and whether a webhook Service reached from outside the cluster is let
// through by the controller's NetworkPolicy; given a repository and runs-on labels, it says which pool the job
// routes to and why each other pool does not. `gantry doctor` is its command.
//
// Each problem is a Finding with a stable name, a message and a fix; every Finding has
// an entry in docs/troubleshooting.md. Doctor resolves credentials exactly as the
// controller does (controller.GitHubResolver) and routes with the controller's own
// demand.Router. It only reads, except for one registration token per pool: the call
// that proves GitHub lets the credentials register runners in the scope.
package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/github"
)

// Status is a check's outcome.
type Status string

const (
	// OK: the check passed.
	OK Status = "ok"
	// Problem: the check failed; a job can wait because of it. Any Problem makes the
	// exit status non-zero.
	Problem Status = "problem"
	// Skipped: the check could not run (an earlier check failed, or it does not apply).
	Skipped Status = "skipped"
)

// Finding names a problem doctor reports. Each has a heading in docs/troubleshooting.md.
type Finding string

// The problems doctor names.
const (
	FindingNoPools                 Finding = "NoPools"
	FindingPoolNotFound            Finding = "PoolNotFound"
	FindingInvalidURL              Finding = "InvalidURL"
	FindingSecretNotFound          Finding = "CredentialsSecretNotFound"
	FindingInvalidCredentials      Finding = "InvalidCredentials"
	FindingCredentialsRejected     Finding = "CredentialsRejected"
	FindingScopeNotFound           Finding = "ScopeNotFound"
	FindingGitHubUnreachable       Finding = "GitHubUnreachable"
	FindingRunnerGroupNotFound     Finding = "RunnerGroupNotFound"
	FindingRunnerGroupNotVisible   Finding = "RunnerGroupNotVisible"
	FindingRunnerGroupNoPublic     Finding = "RunnerGroupRefusesPublicRepositories"
	FindingPoolNotReconciled       Finding = "PoolNotReconciled"
	FindingPoolNotReady            Finding = "PoolNotReady"
	FindingNoWebhookDeliveries     Finding = "NoWebhookDeliveries"
	FindingWebhookSignatureInvalid Finding = "WebhookSignatureMismatch"
	FindingWebhookDeliveryFailed   Finding = "WebhookDeliveryFailed"
	FindingNoPoolMatches           Finding = "NoPoolMatchesJob"
	FindingScaleSetNotConnected    Finding = "ScaleSetNotConnected"
	// FindingWebhookBlockedByNetworkPolicy: the webhook Service is reached from outside
	// the cluster and the controller's NetworkPolicy drops what comes from there.
	FindingWebhookBlockedByNetworkPolicy Finding = "WebhookBlockedByNetworkPolicy"
	// FindingRerunNotPermitted: the pool re-runs jobs killed by the infrastructure
	// (spec.disruption.rerun InfrastructureFailures) and GitHub says its credentials may
	// not (no Actions write).
	FindingRerunNotPermitted Finding = "RerunNotPermitted"
)

// AllFindings lists every Finding, for the test that each has a troubleshooting entry.
var AllFindings = []Finding{
	FindingNoPools, FindingPoolNotFound, FindingInvalidURL, FindingSecretNotFound, FindingInvalidCredentials,
	FindingCredentialsRejected, FindingScopeNotFound, FindingGitHubUnreachable, FindingRunnerGroupNotFound,
	FindingRunnerGroupNotVisible, FindingRunnerGroupNoPublic, FindingPoolNotReconciled, FindingPoolNotReady,
	FindingNoWebhookDeliveries, FindingWebhookSignatureInvalid, FindingWebhookDeliveryFailed, FindingNoPoolMatches,
	FindingScaleSetNotConnected, FindingWebhookBlockedByNetworkPolicy, FindingRerunNotPermitted,
}

// Check is one question asked of one pool.
type Check struct {
	// Name is what was checked: secret, github, runner-group, controller, webhooks,
	// scale-set.
	Name   string  `json:"name"`
	Status Status  `json:"status"`
	Result Finding `json:"finding,omitempty"`
	// Message says what was found, in words.
	Message string `json:"message"`
	// Fix says what to do; set on problems.
	Fix string `json:"fix,omitempty"`
}

// PoolReport is every check of one pool.
type PoolReport struct {
	Pool   string  `json:"pool"`
	URL    string  `json:"url"`
	Checks []Check `json:"checks"`
}

// Report is the whole answer.
type Report struct {
	// Problems lists problems not tied to one pool (none found, none matches the job,
	// a webhook Service GitHub cannot reach).
	Problems []Check `json:"problems,omitempty"`
	// Install lists the checks made once for the install (webhook-exposure) that found
	// no problem: passed, or skipped with the reason — a right doctor lacks among them.
	Install []Check       `json:"install,omitempty"`
	Pools   []PoolReport  `json:"pools"`
	Route   *RouteReport  `json:"route,omitempty"`
	Checked time.Time     `json:"checkedAt"`
	Elapsed time.Duration `json:"-"`
}

// ProblemCount is the number of problems found.
func (r *Report) ProblemCount() int {
	n := len(r.Problems)
	for _, p := range r.Pools {
		for _, c := range p.Checks {
			if c.Status == Problem {
				n++
			}
		}
	}
	return n
}

// ExitCode is the command's exit status: 0 when no problem was found, 1 otherwise.
func (r *Report) ExitCode() int {
	if r.ProblemCount() > 0 {
		return 1
	}
	return 0
}

// Findings lists every problem's Finding, pool checks first, sorted: what tests compare.
func (r *Report) Findings() []Finding {
	var out []Finding
	for _, p := range r.Pools {
		for _, c := range p.Checks {
			if c.Status == Problem {
				out = append(out, c.Result)
			}
		}
	}
	for _, c := range r.Problems {
		out = append(out, c.Result)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Options say what to check.
type Options struct {
	// Kube reads RunnerPools (and, through GitHub, their Secrets).
	Kube client.Reader
	// GitHub resolves a pool's credentials as the controller does. Set AllowHTTP when
	// pools may use http:// (doctor reports the controller's refusal through the pool's
	// Ready condition, not by refusing to look).
	GitHub *controller.GitHubResolver
	// Pool, if set, restricts the checks to one pool.
	Pool *types.NamespacedName
	// Namespace, if set, restricts the checks to one namespace; "" means all.
	Namespace string
	// Job, if set, asks where a job routes and checks runner groups against its
	// repository.
	Job *JobQuery
	// ControllerNamespace, if set, is where the webhook Service is looked for; "" means
	// every namespace.
	ControllerNamespace string
	// Clock tells how long ago the last delivery arrived. Default: real.
	Clock clock.PassiveClock
}

// JobQuery is a job to route: its repository and runs-on labels.
type JobQuery struct {
	// Host is the repository's GitHub host; "" means the pools' host when they all share
	// one, else github.com.
	Host       string
	Owner      string
	Repo       string
	Labels     []string
	Enterprise string
}

// ParseRepository reads OWNER/REPO or a repository URL (https://HOST/OWNER/REPO).
func ParseRepository(s string) (host, owner, repo string, err error) {
	if strings.Contains(s, "://") {
		sc, err := github.ParseURL(s)
		if err != nil || sc.Kind != github.ScopeRepository {
			return "", "", "", fmt.Errorf("--repository %q: want OWNER/REPO or https://HOST/OWNER/REPO", s)
		}
		return sc.Host, sc.Owner, sc.Repo, nil
	}
	owner, repo, ok := strings.Cut(s, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return "", "", "", fmt.Errorf("--repository %q: want OWNER/REPO or https://HOST/OWNER/REPO", s)
	}
	return "", owner, repo, nil
}

// Run checks the pools and, with a Job, routes it. An error means doctor itself could
// not run (the cluster unreachable); problems found are in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	start := o.Clock.Now()
	rep := &Report{Checked: start, Pools: []PoolReport{}}
	pools, err := listPools(ctx, o)
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		c := Check{Name: "pools", Status: Problem, Result: FindingNoPools,
			Message: "no RunnerPool found" + where(o),
			Fix:     "create a RunnerPool (docs/quickstart.md), or point --namespace/--pool (and your kubeconfig's context) at the cluster and namespace that hold them"}
		if o.Pool != nil {
			c.Result, c.Message = FindingPoolNotFound, fmt.Sprintf("RunnerPool %s not found", o.Pool)
			c.Fix = "check the name and namespace: kubectl get runnerpools -A"
		}
		rep.Problems = append(rep.Problems, c)
	}
	hooks := &hookCache{byKey: map[string]Check{}}
	for i := range pools {
		rep.Pools = append(rep.Pools, checkPool(ctx, o, &pools[i], hooks))
	}
	if len(pools) > 0 {
		for _, c := range webhookExposureChecks(ctx, o) {
			if c.Status == Problem {
				rep.Problems = append(rep.Problems, c)
			} else {
				rep.Install = append(rep.Install, c)
			}
		}
	}
	if o.Job != nil {
		route := routeJob(pools, *o.Job)
		rep.Route = &route
		if route.Pool == "" {
			rep.Problems = append(rep.Problems, Check{Name: "route", Status: Problem, Result: FindingNoPoolMatches,
				Message: fmt.Sprintf("no pool takes a job of %s with runs-on %v", route.Repository, route.Labels),
				Fix:     "create a pool whose scope holds the repository and whose labels hold every runs-on label, or change the job's runs-on (see why each pool does not match below)"})
		}
	}
	rep.Elapsed = o.Clock.Since(start)
	return rep, nil
}

func where(o Options) string {
	if o.Namespace != "" {
		return " in namespace " + o.Namespace
	}
	return " in any namespace"
}

func listPools(ctx context.Context, o Options) ([]v1alpha1.RunnerPool, error) {
	if o.Pool != nil {
		var p v1alpha1.RunnerPool
		if err := o.Kube.Get(ctx, *o.Pool, &p); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return nil, nil
			}
			return nil, fmt.Errorf("reading RunnerPool %s: %w", o.Pool, err)
		}
		return []v1alpha1.RunnerPool{p}, nil
	}
	var list v1alpha1.RunnerPoolList
	var opts []client.ListOption
	if o.Namespace != "" {
		opts = append(opts, client.InNamespace(o.Namespace))
	}
	if err := o.Kube.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing RunnerPools: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return list.Items, nil
}
