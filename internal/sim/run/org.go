package run

import (
	"math/rand/v2"
	"time"
)

// Org is the organization steady jobs come from: repositories, each with its
// workflows, drawn by weight as an organization's jobs are — a few busy repositories
// and a tail — so that the report's usage by repository and workflow (report.json's
// usage) has something to tell. A workflow's jobs run its Scale times the scenario's
// JobDuration, scaled again so that the mean job runs JobDuration: the workload's
// load stays the scenario's.
type Org struct {
	Repos []OrgRepo `json:"repos"`
}

// OrgRepo is a repository of acme (Name) and how often its jobs come.
type OrgRepo struct {
	Name      string        `json:"name"`
	Weight    float64       `json:"weight"`
	Workflows []OrgWorkflow `json:"workflows"`
}

// OrgWorkflow is a workflow of a repository: how often among the repository's jobs,
// how long its jobs run (Scale × JobDuration), and its jobs' names, taken in turn.
type OrgWorkflow struct {
	Name   string   `json:"name"`
	Weight float64  `json:"weight"`
	Scale  float64  `json:"scale"`
	Jobs   []string `json:"jobs"`
}

// AcmeOrg is steady's organization: eight repositories, thirteen workflows.
var AcmeOrg = &Org{Repos: []OrgRepo{
	{Name: "web", Weight: 30, Workflows: []OrgWorkflow{
		{Name: "CI", Weight: 6, Scale: 1, Jobs: []string{"build", "test", "lint"}},
		{Name: "E2E", Weight: 2, Scale: 2, Jobs: []string{"e2e (chrome)", "e2e (firefox)"}},
		{Name: "Deploy", Weight: 2, Scale: 0.5, Jobs: []string{"deploy"}},
	}},
	{Name: "api", Weight: 20, Workflows: []OrgWorkflow{
		{Name: "CI", Weight: 7, Scale: 1, Jobs: []string{"build", "unit"}},
		{Name: "Integration", Weight: 3, Scale: 1.5, Jobs: []string{"integration"}},
	}},
	{Name: "mobile", Weight: 15, Workflows: []OrgWorkflow{
		{Name: "Build", Weight: 8, Scale: 1.5, Jobs: []string{"android", "ios"}},
		{Name: "Release", Weight: 2, Scale: 1, Jobs: []string{"release"}},
	}},
	{Name: "infra", Weight: 10, Workflows: []OrgWorkflow{{Name: "Terraform plan", Weight: 1, Scale: 0.5, Jobs: []string{"plan"}}}},
	{Name: "data-pipeline", Weight: 8, Workflows: []OrgWorkflow{{Name: "CI", Weight: 1, Scale: 1.2, Jobs: []string{"test"}}}},
	{Name: "payments", Weight: 8, Workflows: []OrgWorkflow{
		{Name: "CI", Weight: 7, Scale: 1, Jobs: []string{"test"}},
		{Name: "Security scan", Weight: 3, Scale: 0.7, Jobs: []string{"codeql"}},
	}},
	{Name: "docs", Weight: 5, Workflows: []OrgWorkflow{{Name: "Publish", Weight: 1, Scale: 0.25, Jobs: []string{"publish"}}}},
	{Name: "design-system", Weight: 4, Workflows: []OrgWorkflow{{Name: "Storybook", Weight: 1, Scale: 0.75, Jobs: []string{"storybook"}}}},
}}

// orgJob is one job drawn from an Org.
type orgJob struct {
	repo, workflow, name string
	duration             time.Duration
}

// draw picks a repository, then one of its workflows, by weight, and the workflow's
// next job name; mean is the scenario's JobDuration. seq numbers the draws.
func (o *Org) draw(rng *rand.Rand, mean time.Duration, seq int) orgJob {
	r := pick(rng, o.Repos, func(r OrgRepo) float64 { return r.Weight })
	w := pick(rng, r.Workflows, func(w OrgWorkflow) float64 { return w.Weight })
	return orgJob{
		repo: r.Name, workflow: w.Name, name: w.Jobs[seq%len(w.Jobs)],
		duration: time.Duration(float64(mean) * w.Scale / o.meanScale()),
	}
}

// meanScale is the mean of the workflows' Scale over the jobs drawn.
func (o *Org) meanScale() float64 {
	var sum, total float64
	for _, r := range o.Repos {
		var ws float64
		for _, w := range r.Workflows {
			ws += w.Weight
		}
		for _, w := range r.Workflows {
			sum += r.Weight * w.Weight / ws * w.Scale
		}
		total += r.Weight
	}
	if sum <= 0 {
		return 1
	}
	return sum / total
}

// names are the organization's repositories.
func (o *Org) names() []string {
	out := make([]string, 0, len(o.Repos))
	for _, r := range o.Repos {
		out = append(out, r.Name)
	}
	return out
}

func pick[T any](rng *rand.Rand, xs []T, weight func(T) float64) T {
	var total float64
	for _, x := range xs {
		total += weight(x)
	}
	v := rng.Float64() * total
	for _, x := range xs {
		if v -= weight(x); v < 0 {
			return x
		}
	}
	return xs[len(xs)-1]
}
