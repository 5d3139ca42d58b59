package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	gogithub "github.com/google/go-github/v88/github"
)

// ExportOptions say what Export reads.
type ExportOptions struct {
	// Org is the organization.
	Org string
	// Repos limits the export to these repositories (names without the owner);
	// empty means every repository the credentials can list.
	Repos []string
	// Since and Until bound the runs by creation time (Until zero: now).
	Since, Until time.Time
	// AllJobs keeps jobs without the self-hosted label too (by default only jobs that
	// asked for a self-hosted runner are kept).
	AllJobs bool
	// Source is written in the header (default https://github.com/ORG).
	Source string
	// Log receives progress lines (optional).
	Log io.Writer
}

// ExportStats count what Export saw and left out.
type ExportStats struct {
	Repos, Runs, Jobs int
	// Skipped jobs: never ran on a runner (skipped, or canceled while queued), not
	// finished yet, or not for a self-hosted runner.
	NeverRan, Unfinished, NotSelfHosted int
}

// maxRunsPerQuery is how many runs GitHub returns at most for one query with the
// created filter; a window with more is split. A variable for tests.
var maxRunsPerQuery = 1000

// Export reads the workflow runs created in [Since, Until) of an organization's
// repositories and their jobs (every attempt) through the GitHub REST API — GET
// /orgs/{org}/repos, GET /repos/{o}/{r}/actions/runs?created=…, GET
// /repos/{o}/{r}/actions/runs/{id}/jobs?filter=all — and returns them as a trace:
// each finished job that ran on a runner, queued at its created_at, running from
// started_at to completed_at.
func Export(ctx context.Context, gh *gogithub.Client, opts ExportOptions) (Trace, ExportStats, error) {
	var st ExportStats
	if opts.Org == "" {
		return Trace{}, st, errors.New("no organization given")
	}
	if opts.Until.IsZero() {
		opts.Until = time.Now()
	}
	if !opts.Since.Before(opts.Until) {
		return Trace{}, st, fmt.Errorf("since (%s) must be before until (%s)", opts.Since.Format(time.RFC3339), opts.Until.Format(time.RFC3339))
	}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}
	repos := opts.Repos
	if len(repos) == 0 {
		var err error
		if repos, err = listRepos(ctx, gh, opts.Org); err != nil {
			return Trace{}, st, err
		}
	}
	st.Repos = len(repos)
	type rec struct {
		created time.Time
		job     Job
	}
	var recs []rec
	for _, repo := range repos {
		runs, err := listRuns(ctx, gh, opts.Org, repo, opts.Since, opts.Until)
		if err != nil {
			return Trace{}, st, err
		}
		logf("%s/%s: %d runs", opts.Org, repo, len(runs))
		st.Runs += len(runs)
		for _, run := range runs {
			jobs, err := listJobs(ctx, gh, opts.Org, repo, run.GetID())
			if err != nil {
				return Trace{}, st, err
			}
			for _, j := range jobs {
				st.Jobs++
				switch {
				case j.GetStatus() != "completed":
					st.Unfinished++
					continue
				case j.StartedAt == nil || j.CompletedAt == nil || j.CreatedAt == nil || j.GetRunnerName() == "":
					// No runner ever took it: skipped, or canceled or failed while queued.
					st.NeverRan++
					continue
				case !opts.AllJobs && !hasLabel(j.Labels, "self-hosted"):
					st.NotSelfHosted++
					continue
				}
				created, started, done := j.CreatedAt.Time, j.StartedAt.Time, j.CompletedAt.Time
				pickup := SecondsOf(max(0, started.Sub(created)))
				job := Job{
					Repo: opts.Org + "/" + repo, Labels: j.Labels,
					Duration: SecondsOf(max(0, done.Sub(started))),
					Run:      RunKey(fmt.Sprintf("%s#%d", repo, run.GetID())),
					Workflow: j.GetWorkflowName(), Name: j.GetName(), Branch: j.GetHeadBranch(),
					Conclusion: conclusion(j.GetConclusion()), Pickup: &pickup,
				}
				if job.Duration.Duration() > MaxDuration {
					job.Duration = SecondsOf(MaxDuration)
				}
				recs = append(recs, rec{created: created, job: job})
			}
		}
	}
	sort.SliceStable(recs, func(a, b int) bool { return recs[a].created.Before(recs[b].created) })
	src := opts.Source
	if src == "" {
		src = "https://github.com/" + opts.Org
	}
	now := time.Now().UTC()
	since, until := opts.Since.UTC(), opts.Until.UTC()
	t := Trace{Header: Header{Format: Format, Source: src, Since: &since, Until: &until, ExportedAt: &now}}
	for _, r := range recs {
		j := r.job
		j.At = SecondsOf(r.created.Sub(recs[0].created))
		if err := j.Validate(); err != nil {
			return Trace{}, st, fmt.Errorf("job %q of %s: %w", j.Name, j.Repo, err)
		}
		t.Jobs = append(t.Jobs, j)
	}
	t.Header.Jobs = len(t.Jobs)
	return t, st, nil
}

// conclusion maps GitHub's job conclusions to the three a replayed runner reports.
func conclusion(c string) string {
	switch c {
	case "success", "":
		return ""
	case "cancelled": //nolint:misspell // GitHub's spelling
		return c
	}
	return "failure" // failure, timed_out, action_required, neutral, stale
}

func hasLabel(labels []string, want string) bool {
	for _, l := range labels {
		if strings.EqualFold(l, want) {
			return true
		}
	}
	return false
}

func listRepos(ctx context.Context, gh *gogithub.Client, org string) ([]string, error) {
	var out []string
	opt := &gogithub.RepositoryListByOrgOptions{ListOptions: gogithub.ListOptions{PerPage: 100}}
	for {
		repos, resp, err := gh.Repositories.ListByOrg(ctx, org, opt)
		if err != nil {
			return nil, fmt.Errorf("listing the repositories of %s: %w", org, err)
		}
		for _, r := range repos {
			out = append(out, r.GetName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// listRuns lists the runs created in [since, until), splitting a window whose runs
// GitHub would truncate (more than 1,000 for one created filter), down to a minute.
func listRuns(ctx context.Context, gh *gogithub.Client, org, repo string, since, until time.Time) ([]*gogithub.WorkflowRun, error) {
	seen := map[int64]bool{}
	var out []*gogithub.WorkflowRun
	var walk func(from, to time.Time) error
	walk = func(from, to time.Time) error {
		// created ranges are inclusive at both ends; runs on a boundary are deduplicated.
		created := from.UTC().Format(time.RFC3339) + ".." + to.UTC().Format(time.RFC3339)
		opt := &gogithub.ListWorkflowRunsOptions{Created: created, ListOptions: gogithub.ListOptions{PerPage: 100}}
		var window []*gogithub.WorkflowRun
		for {
			runs, resp, err := gh.Actions.ListRepositoryWorkflowRuns(ctx, org, repo, opt)
			if err != nil {
				return fmt.Errorf("listing the runs of %s/%s created %s: %w", org, repo, created, err)
			}
			if runs.GetTotalCount() > maxRunsPerQuery && to.Sub(from) > time.Minute {
				mid := from.Add(to.Sub(from) / 2).Truncate(time.Second)
				if err := walk(from, mid); err != nil {
					return err
				}
				return walk(mid, to)
			}
			window = append(window, runs.WorkflowRuns...)
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
		for _, r := range window {
			c := r.GetCreatedAt().Time
			if seen[r.GetID()] || c.Before(since) || !c.Before(until) {
				continue
			}
			seen[r.GetID()] = true
			out = append(out, r)
		}
		return nil
	}
	if err := walk(since, until); err != nil {
		return nil, err
	}
	return out, nil
}

func listJobs(ctx context.Context, gh *gogithub.Client, org, repo string, runID int64) ([]*gogithub.WorkflowJob, error) {
	var out []*gogithub.WorkflowJob
	opt := &gogithub.ListWorkflowJobsOptions{Filter: "all", ListOptions: gogithub.ListOptions{PerPage: 100}}
	for {
		jobs, resp, err := gh.Actions.ListWorkflowJobs(ctx, org, repo, runID, opt)
		if err != nil {
			return nil, fmt.Errorf("listing the jobs of run %d of %s/%s: %w", runID, org, repo, err)
		}
		out = append(out, jobs.Jobs...)
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}
