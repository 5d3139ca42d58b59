package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/github"
)

// Names of the checks, in the order they run.
const (
	CheckSecret      = "secret"
	CheckGitHub      = "github"
	CheckRunnerGroup = "runner-group"
	CheckWebhooks    = "webhooks"
	CheckController  = "controller"
	// CheckRerun runs for pools that re-run jobs killed by the infrastructure only.
	CheckRerun = "rerun"
	// CheckScaleSet runs for scale-set pools only.
	CheckScaleSet = "scale-set"
)

// checkPool runs every check of one pool. A check that needs an earlier one to pass is
// skipped when it failed.
func checkPool(ctx context.Context, o Options, pool *v1alpha1.RunnerPool, hooks *hookCache) PoolReport {
	pr := PoolReport{Pool: pool.Namespace + "/" + pool.Name, URL: pool.Spec.GitHub.URL}
	pr.Checks = append(checkGitHubSide(ctx, o, pool, hooks), controllerCheck(pool))
	if pool.UsesScaleSet() {
		pr.Checks = append(pr.Checks, scaleSetCheck(pool))
	}
	return pr
}

// checkGitHubSide runs the checks from the Secret to the webhooks.
func checkGitHubSide(ctx context.Context, o Options, pool *v1alpha1.RunnerPool, hooks *hookCache) []Check {
	var checks []Check
	add := func(c Check) { checks = append(checks, c) }
	skip := func(names ...string) {
		for _, n := range names {
			add(Check{Name: n, Status: Skipped, Message: "not checked: an earlier check failed"})
		}
	}

	secret := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name}
	gh, scope, err := o.GitHub.For(ctx, pool)
	if err != nil {
		var cfg *controller.ConfigError
		if !errors.As(err, &cfg) {
			add(Check{Name: CheckSecret, Status: Problem, Result: FindingSecretNotFound, Message: err.Error(),
				Fix: "doctor could not read the Secret: run it with a kubeconfig allowed to get Secrets in " + pool.Namespace})
			skip(CheckGitHub, CheckRunnerGroup, CheckWebhooks)
			return checks
		}
		switch cfg.Reason {
		case controller.ReasonInvalidURL:
			add(Check{Name: CheckGitHub, Status: Problem, Result: FindingInvalidURL, Message: cfg.Message,
				Fix: "create a new pool with a valid github.url (the field is immutable)"})
			skip(CheckSecret, CheckRunnerGroup, CheckWebhooks)
		case controller.ReasonSecretNotFound:
			add(Check{Name: CheckSecret, Status: Problem, Result: FindingSecretNotFound, Message: cfg.Message,
				Fix: fmt.Sprintf("kubectl -n %s create secret generic %s --from-literal=github_token=... (or the three github_app_* keys, docs/quickstart.md)", secret.Namespace, secret.Name)})
			skip(CheckGitHub, CheckRunnerGroup, CheckWebhooks)
		default:
			add(Check{Name: CheckSecret, Status: Problem, Result: FindingInvalidCredentials, Message: cfg.Message,
				Fix: "fix the key the message names in Secret " + secret.String() + " (docs/quickstart.md lists the keys)"})
			skip(CheckGitHub, CheckRunnerGroup, CheckWebhooks)
		}
		return checks
	}
	add(Check{Name: CheckSecret, Status: OK, Message: "Secret " + secret.String() + " found and complete"})

	if _, err := gh.CreateRegistrationToken(ctx, scope); err != nil {
		add(githubProblem(CheckGitHub, scope, err))
		skip(CheckRunnerGroup, CheckWebhooks)
		return checks
	}
	add(Check{Name: CheckGitHub, Status: OK, Message: "GitHub accepts the credentials for " + scope.String() + " (a registration token was issued)"})
	add(runnerGroupCheck(ctx, o, pool, gh, scope))
	if pool.Spec.Disruption.RerunsInfrastructureFailures() {
		add(rerunCheck(ctx, gh, scope))
	}
	if pool.UsesScaleSet() {
		add(Check{Name: CheckWebhooks, Status: Skipped, Message: "does not apply: the pool's demand comes from runner scale set " + pool.ScaleSetName()})
	} else {
		add(hooks.check(ctx, o, secret, gh, scope))
	}
	return checks
}

// githubProblem turns a failed GitHub call into a Check.
func githubProblem(name string, scope github.Scope, err error) Check {
	switch {
	case github.IsUnauthorized(err):
		return Check{Name: name, Status: Problem, Result: FindingCredentialsRejected, Message: err.Error(),
			Fix: "a GitHub App needs Self-hosted runners: read and write (organization) or Administration: read and write (repository) and an installation on " +
				scope.String() + "; a token needs manage_runners:org (organization), repo (repository) or manage_runners:enterprise (enterprise): docs/quickstart.md"}
	case github.IsNotFound(err):
		return Check{Name: name, Status: Problem, Result: FindingScopeNotFound, Message: err.Error(),
			Fix: "check that " + scope.String() + " exists and that the App is installed on it (or the token's user can administer it)"}
	}
	fix := "check that the controller's network reaches " + scope.APIBaseURL() + " (proxy, firewall, DNS)"
	msg := err.Error()
	if strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate") {
		fix = "the server's certificate is not trusted: give the controller (--github-ca-bundle, chart value githubCABundle) and doctor (--github-ca-bundle) the CA that signed it"
	}
	if github.IsRateLimited(err) {
		fix = "the credentials' rate limit is spent: wait until it resets (gantry_github_rate_limit_remaining), or give pools separate credentials"
	}
	return Check{Name: name, Status: Problem, Result: FindingGitHubUnreachable, Message: msg, Fix: fix}
}

// runnerGroupCheck checks that the pool's runner group exists and, for a job's
// repository in the pool's scope (or, without one, the repositories whose jobs the pool
// saw lately), that the group admits it.
func runnerGroupCheck(ctx context.Context, o Options, pool *v1alpha1.RunnerPool, gh github.Client, scope github.Scope) Check {
	c := Check{Name: CheckRunnerGroup}
	if scope.Kind == github.ScopeRepository {
		c.Status, c.Message = OK, "a repository pool's runners belong to the repository: no runner group applies"
		return c
	}
	insp, ok := gh.(github.Inspector)
	if !ok {
		c.Status, c.Message = Skipped, "this GitHub client cannot list runner groups"
		return c
	}
	name := pool.Spec.GitHub.RunnerGroup
	if name == "" {
		name = "Default"
	}
	groups, err := insp.RunnerGroups(ctx, scope, "")
	if err != nil {
		return githubProblem(CheckRunnerGroup, scope, err)
	}
	var group *github.RunnerGroup
	var names []string
	for i := range groups {
		names = append(names, groups[i].Name)
		if strings.EqualFold(groups[i].Name, name) {
			group = &groups[i]
		}
	}
	if group == nil {
		c.Status, c.Result = Problem, FindingRunnerGroupNotFound
		c.Message = fmt.Sprintf("runner group %q does not exist in %s (groups: %s)", name, scope, strings.Join(names, ", "))
		c.Fix = "set spec.github.runnerGroup to one of those groups, or create the group in the " + string(scope.Kind) + "'s Actions settings"
		return c
	}
	public := "public repositories not allowed"
	if group.AllowsPublicRepositories {
		public = "public repositories allowed"
	}
	c.Status = OK
	c.Message = fmt.Sprintf("runner group %q (id %d, visibility %s, %s)", group.Name, group.ID, group.Visibility, public)

	j := o.Job
	if j == nil {
		return recentPublicCheck(ctx, c, insp, scope, group, pool)
	}
	if !inScope(scope, *j) {
		return c
	}
	repo := j.Owner + "/" + j.Repo
	org := scope
	org.Kind, org.Owner, org.Repo, org.Enterprise = github.ScopeOrganization, j.Owner, "", ""
	isPublic, err := insp.RepositoryIsPublic(ctx, org, j.Repo)
	switch {
	case github.IsNotFound(err):
		c.Message += fmt.Sprintf("; repository %s not found with these credentials, so its access was not checked", repo)
		return c
	case err != nil:
		return githubProblem(CheckRunnerGroup, scope, err)
	}
	if isPublic && !group.AllowsPublicRepositories {
		c.Status, c.Result = Problem, FindingRunnerGroupNoPublic
		c.Message = fmt.Sprintf("%s is public and runner group %q does not allow public repositories: its jobs wait until GitHub cancels them", repo, group.Name)
		c.Fix = "in the runner group's settings, tick \"Allow public repositories\" (mind the risk: anyone's pull request can run there), or use another group"
		return c
	}
	visibleTo := j.Repo
	if scope.Kind == github.ScopeEnterprise {
		visibleTo = j.Owner
	}
	visible, err := insp.RunnerGroups(ctx, scope, visibleTo)
	if err != nil {
		return githubProblem(CheckRunnerGroup, scope, err)
	}
	for _, g := range visible {
		if g.ID == group.ID {
			c.Message += "; admits " + repo
			return c
		}
	}
	c.Status, c.Result = Problem, FindingRunnerGroupNotVisible
	c.Message = fmt.Sprintf("runner group %q (visibility %s) does not admit %s", group.Name, group.Visibility, repo)
	c.Fix = "add the repository (or, for an enterprise group, the organization) to the group's selected list, or set its visibility to all"
	return c
}

func inScope(scope github.Scope, j JobQuery) bool {
	if j.Host != "" && !strings.EqualFold(j.Host, scope.Host) {
		return false
	}
	switch scope.Kind {
	case github.ScopeOrganization:
		return strings.EqualFold(scope.Owner, j.Owner)
	case github.ScopeEnterprise:
		return j.Enterprise == "" || strings.EqualFold(scope.Enterprise, j.Enterprise)
	}
	return false
}

// controllerCheck reads what the controller says of the pool: its Ready condition.
func controllerCheck(pool *v1alpha1.RunnerPool) Check {
	c := Check{Name: CheckController}
	ready := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration < pool.Generation:
		c.Status, c.Result = Problem, FindingPoolNotReconciled
		c.Message = fmt.Sprintf("the controller has not reconciled generation %d of this pool", pool.Generation)
		c.Fix = "check that the controller runs (kubectl -n gantry-system get pods), that it watches namespace " + pool.Namespace +
			" (--namespaces, chart value watchNamespaces) and its logs"
	case ready.Status != "True":
		c.Status, c.Result = Problem, FindingPoolNotReady
		c.Message = fmt.Sprintf("Ready=%s, reason %s: %s", ready.Status, ready.Reason, ready.Message)
		c.Fix = "see docs/troubleshooting.md, entry " + ready.Reason
	default:
		c.Status, c.Message = OK, "Ready: "+ready.Message
	}
	return c
}

// hookCache reads each App's delivery log once: pools sharing credentials share it.
type hookCache struct {
	byKey map[string]Check
}

// check reads GitHub's delivery log of the App behind the pool's credentials: when the
// last workflow_job delivery went out and what the controller answered (401 means the
// webhook secrets differ).
func (h *hookCache) check(ctx context.Context, o Options, secret types.NamespacedName, gh github.Client, scope github.Scope) Check {
	key := secret.String() + "@" + scope.Host
	if c, ok := h.byKey[key]; ok {
		return c
	}
	c := h.read(ctx, o, gh, scope)
	h.byKey[key] = c
	return c
}

func (h *hookCache) read(ctx context.Context, o Options, gh github.Client, scope github.Scope) Check {
	c := Check{Name: CheckWebhooks}
	page, err := gh.ListHookDeliveries(ctx, scope, "")
	if github.IsUnauthorized(err) {
		c.Status = Skipped
		c.Message = "GitHub's delivery log is read with GitHub App credentials only; see the webhook's Recent Deliveries in GitHub's settings " +
			"and gantry_webhook_deliveries_total{result=\"bad_signature\"} on the controller's /metrics"
		return c
	}
	if err != nil {
		return githubProblem(CheckWebhooks, scope, err)
	}
	var jobs []github.HookDelivery
	bad := 0
	for _, d := range page.Deliveries {
		if d.Event != "workflow_job" {
			continue
		}
		jobs = append(jobs, d)
		if d.StatusCode == 401 {
			bad++
		}
	}
	if len(jobs) == 0 {
		c.Status, c.Result = Problem, FindingNoWebhookDeliveries
		c.Message = "the App's delivery log has no workflow_job delivery: GitHub sent Gantry no job"
		c.Fix = "in the App's settings: Webhook active, URL https://<your ingress>/webhook, and the Workflow job event subscribed; resync still finds repository pools' jobs every --resync-interval"
		return c
	}
	last := jobs[0]
	ago := o.Clock.Since(last.DeliveredAt).Round(time.Second)
	when := fmt.Sprintf("last workflow_job delivery %s (%s ago)", last.DeliveredAt.UTC().Format(time.RFC3339), ago)
	switch {
	case last.StatusCode == 401:
		c.Status, c.Result = Problem, FindingWebhookSignatureInvalid
		c.Message = fmt.Sprintf("%s was refused with 401: its signature does not match (%d of the last %d deliveries)", when, bad, len(jobs))
		c.Fix = "put the App's webhook secret in the controller's webhook Secret (key webhook_secret), or set the App's secret to that value"
	case last.StatusCode/100 != 2:
		c.Status, c.Result = Problem, FindingWebhookDeliveryFailed
		c.Message = fmt.Sprintf("%s failed: %q (HTTP %d)", when, last.Status, last.StatusCode)
		c.Fix = "GitHub cannot reach the controller's /webhook, or it refused: check the Ingress or Gateway route, the Service and the controller's logs; resync redelivers failed deliveries"
	default:
		c.Status = OK
		c.Message = fmt.Sprintf("%s, answered %d", when, last.StatusCode)
		if bad > 0 {
			c.Message += fmt.Sprintf("; %d of the last %d were refused for a bad signature", bad, len(jobs))
		}
	}
	return c
}

// scaleSetCheck reads what the controller says of a scale-set pool's scale set and
// message session: its ScaleSetSession condition.
func scaleSetCheck(pool *v1alpha1.RunnerPool) Check {
	c := Check{Name: CheckScaleSet}
	cond := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.ConditionScaleSetSession)
	switch {
	case cond == nil:
		c.Status, c.Result = Problem, FindingScaleSetNotConnected
		c.Message = "the controller has not reported on the pool's scale set yet"
		c.Fix = "check that the controller runs and leads (kubectl -n gantry-system get lease gantry-controller.gantry.dev) and its logs (logger scaleset)"
	case cond.Status != "True":
		c.Status, c.Result = Problem, FindingScaleSetNotConnected
		c.Message = fmt.Sprintf("ScaleSetSession=%s, reason %s: %s", cond.Status, cond.Reason, cond.Message)
		c.Fix = "see docs/troubleshooting.md, entry ScaleSetSession: " + cond.Reason
	default:
		id := int64(0)
		if pool.Status.ScaleSet != nil {
			id = pool.Status.ScaleSet.ID
		}
		c.Status, c.Message = OK, fmt.Sprintf("scale set %s (id %d): its message session is open and long-polled", pool.ScaleSetName(), id)
	}
	return c
}

// recentPublicCheck is the runner-group check without a job to ask about: in an
// organization pool whose group refuses public repositories, a public repository among
// those that sent the pool jobs lately (status.recentRepositories) is named — its jobs
// get runners that GitHub never gives them.
func recentPublicCheck(ctx context.Context, c Check, insp github.Inspector, scope github.Scope, group *github.RunnerGroup, pool *v1alpha1.RunnerPool) Check {
	if scope.Kind != github.ScopeOrganization || group.AllowsPublicRepositories {
		return c
	}
	for _, r := range pool.Status.RecentRepositories {
		owner, repo, ok := strings.Cut(r.Name, "/")
		if !ok || !strings.EqualFold(owner, scope.Owner) {
			continue
		}
		isPublic, err := insp.RepositoryIsPublic(ctx, scope, repo)
		if err != nil || !isPublic {
			continue // not found with these credentials, or GitHub's answer is elsewhere in the report
		}
		c.Status, c.Result = Problem, FindingRunnerGroupNoPublic
		c.Message = fmt.Sprintf("%s, which sent this pool a job lately, is public and runner group %q does not allow public repositories: its jobs wait until GitHub cancels them", r.Name, group.Name)
		c.Fix = "in the runner group's settings, tick \"Allow public repositories\" (mind the risk: anyone's pull request can run there), or use another group"
		return c
	}
	return c
}

// rerunCheck checks, for a pool that re-runs jobs killed by the infrastructure, that
// GitHub lets its credentials re-run jobs: an App's installation has actions: write, a
// classic token the repo scope. A fine-grained token's permissions are not told: the
// check says what it needs and passes.
func rerunCheck(ctx context.Context, gh github.Client, scope github.Scope) Check {
	c := Check{Name: CheckRerun}
	in, ok := gh.(github.Inspector)
	if !ok {
		c.Status, c.Message = Skipped, "not checked: these credentials cannot be inspected"
		return c
	}
	p, err := in.ActionsWrite(ctx, scope)
	switch {
	case err != nil:
		c = githubProblem(CheckRerun, scope, err)
	case !p.Known:
		c.Status = OK
		c.Message = "the token's permissions are not told by GitHub (a fine-grained token): it needs Actions: Read and write on the repositories whose killed jobs are re-run"
	case p.Granted:
		c.Status = OK
		c.Message = "the credentials may re-run jobs (" + p.Has + ")"
	default:
		c.Status, c.Result = Problem, FindingRerunNotPermitted
		c.Message = "spec.disruption.rerun is InfrastructureFailures, but GitHub says the credentials may not re-run jobs (" + p.Has + "): killed jobs would stay failed"
		c.Fix = "give the GitHub App the Actions: Read and write repository permission (and accept it on the installation), or the classic token the repo scope; or set spec.disruption.rerun: Never"
	}
	return c
}
