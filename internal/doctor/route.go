package doctor

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// RouteReport says where a job goes and why each other pool does not take it.
type RouteReport struct {
	Repository string   `json:"repository"`
	Host       string   `json:"host"`
	Labels     []string `json:"labels"`
	// Pool is the pool the job routes to; "" when none matches.
	Pool  string         `json:"pool,omitempty"`
	Pools []PoolDecision `json:"pools"`
}

// PoolDecision is one pool's part in a routing decision.
type PoolDecision struct {
	Pool string `json:"pool"`
	// Takes is true for the pool the job routes to.
	Takes bool `json:"takes"`
	// Matches is true when the pool could take the job (scope and labels), even if
	// another pool is preferred.
	Matches bool   `json:"matches"`
	Why     string `json:"why"`
}

// routeJob routes the job with the controller's Router and explains every pool's part.
// Doctor never matches labels itself: each question ("does this pool take the job?",
// "is the repository in its scope?", "does it take label L?") is put to a Router.
func routeJob(pools []v1alpha1.RunnerPool, q JobQuery) RouteReport {
	host := q.Host
	if host == "" {
		host = commonHost(pools)
	}
	job := demand.Job{Host: host, Owner: q.Owner, Repo: q.Repo, Labels: q.Labels, Enterprise: q.Enterprise}
	rep := RouteReport{Repository: q.Owner + "/" + q.Repo, Host: host, Labels: q.Labels, Pools: []PoolDecision{}}

	all := demand.NewRouter()
	routed := map[types.NamespacedName]demand.Pool{}
	var unparsable []PoolDecision
	for i := range pools {
		p, err := runnerpool.RouterPool(&pools[i])
		if err != nil {
			unparsable = append(unparsable, PoolDecision{Pool: key(&pools[i]).String(), Why: "its github.url is invalid: " + err.Error()})
			continue
		}
		all.SetPool(p)
		routed[p.Key] = p
	}
	winner, ok := all.Route(job)
	if ok {
		rep.Pool = winner.String()
	}
	for i := range pools {
		k := key(&pools[i])
		p, parsed := routed[k]
		if !parsed {
			continue
		}
		d := PoolDecision{Pool: k.String()}
		switch {
		case ok && k == winner:
			d.Takes, d.Matches = true, true
			d.Why = "takes the job: its scope holds the repository and its labels cover runs-on"
		case routes(p, job):
			d.Matches = true
			d.Why = "matches too, but " + winner.String() + " is preferred: " + preference(routed[winner], p)
		default:
			d.Why = whyNot(p, job)
		}
		rep.Pools = append(rep.Pools, d)
	}
	rep.Pools = append(rep.Pools, unparsable...)
	return rep
}

// routes asks a Router holding only p whether it takes j.
func routes(p demand.Pool, j demand.Job) bool {
	r := demand.NewRouter()
	r.SetPool(p)
	_, ok := r.Route(j)
	return ok
}

// whyNot explains why a pool does not take a job: its scope, or the labels it lacks.
func whyNot(p demand.Pool, j demand.Job) string {
	scopeOnly := j
	scopeOnly.Labels = []string{"self-hosted"}
	if !routes(p, scopeOnly) {
		switch p.Kind {
		case demand.ScopeRepository:
			return fmt.Sprintf("its scope is repository %s/%s on %s, not %s on %s", p.Owner, p.Repo, p.Host, j.Repository(), j.Host)
		case demand.ScopeOrganization:
			return fmt.Sprintf("its scope is organization %s on %s, which does not hold %s on %s", p.Owner, p.Host, j.Repository(), j.Host)
		default:
			if j.Enterprise == "" {
				return fmt.Sprintf("its scope is enterprise %s: name the repository's enterprise with --enterprise to route to it", p.Enterprise)
			}
			return fmt.Sprintf("its scope is enterprise %s, not %s", p.Enterprise, j.Enterprise)
		}
	}
	var missing []string
	for _, l := range j.Labels {
		one := j
		one.Labels = []string{l}
		if !routes(p, one) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return "its runners do not carry this combination of labels"
	}
	return fmt.Sprintf("its runners do not carry %s (pool labels: [%s])", quoteAll(missing), strings.Join(p.Labels, ", "))
}

// preference says why the Router prefers winner to p, by its rule: the more specific
// scope, then fewer labels, then the name.
func preference(winner, p demand.Pool) string {
	switch {
	case winner.Kind != p.Kind:
		return fmt.Sprintf("the %s scope is more specific than the %s scope", kindName(winner.Kind), kindName(p.Kind))
	case len(winner.Labels) != len(p.Labels):
		return fmt.Sprintf("it has fewer labels (%d against %d): the closest fit", len(winner.Labels), len(p.Labels))
	}
	return "equal fit; the first namespace/name wins"
}

func kindName(k demand.ScopeKind) string {
	switch k {
	case demand.ScopeRepository:
		return "repository"
	case demand.ScopeOrganization:
		return "organization"
	}
	return "enterprise"
}

func quoteAll(ls []string) string {
	q := make([]string, len(ls))
	for i, l := range ls {
		q[i] = fmt.Sprintf("%q", l)
	}
	return strings.Join(q, ", ")
}

func key(p *v1alpha1.RunnerPool) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// commonHost is the host every pool shares, else github.com.
func commonHost(pools []v1alpha1.RunnerPool) string {
	host := ""
	for i := range pools {
		sc, err := github.ParseURL(pools[i].Spec.GitHub.URL)
		if err != nil {
			continue
		}
		if host != "" && host != sc.Host {
			return "github.com"
		}
		host = sc.Host
	}
	if host == "" {
		return "github.com"
	}
	return host
}
