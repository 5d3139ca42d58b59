package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	gogithub "github.com/google/go-github/v88/github"
	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/internal/sim/trace"
)

func newSimExportTraceCommand() *cobra.Command {
	var (
		org, since, until, apiURL, out string
		repos                          []string
		allJobs                        bool
	)
	cmd := &cobra.Command{
		Use:   "export-trace --org ORG [--since 7d]",
		Short: "Write a trace of an organization's workflow jobs, for gantry sim run --trace",
		Long: `Reads the workflow runs created since --since of every repository of --org (or
of the --repo ones) and their jobs through the GitHub REST API, and writes each finished
job that ran on a self-hosted runner (every job with --all-jobs) as a line of a trace:
when it was queued, its repository, labels, duration, run, and how long it waited for a
runner. The token comes from GITHUB_TOKEN (a classic PAT with repo scope, or a
fine-grained token with Actions: read); it is never written anywhere.

It costs one call per 100 repositories, one per 100 runs (more for busy repositories:
GitHub returns at most 1,000 runs per query, so busy windows are split) and one per
run. --api-url points at a GHES host (https://HOST/api/v3/) or the GitHub simulator.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if org == "" {
				return errors.New("--org is required")
			}
			token := os.Getenv("GITHUB_TOKEN")
			if token == "" {
				return errors.New("GITHUB_TOKEN is not set: export a token that can read the organization's Actions runs")
			}
			now := time.Now()
			from, err := parseSince(since, now)
			if err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			to := now
			if until != "" {
				if to, err = parseSince(until, now); err != nil {
					return fmt.Errorf("--until: %w", err)
				}
			}
			base := strings.TrimRight(apiURL, "/") + "/"
			gh, err := gogithub.NewClient(gogithub.WithAuthToken(token), gogithub.WithURLs(&base, nil),
				gogithub.WithUserAgent("gantry-sim-export-trace"))
			if err != nil {
				return fmt.Errorf("--api-url: %w", err)
			}
			progress := cmd.ErrOrStderr()
			tr, st, err := trace.Export(cmd.Context(), gh, trace.ExportOptions{
				Org: org, Repos: repos, Since: from, Until: to, AllJobs: allJobs, Log: progress,
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			if err := trace.Write(w, tr); err != nil {
				return err
			}
			fmt.Fprintf(progress, "%d repositories, %d runs, %d jobs: %d written; left out %d that never ran on a runner, %d unfinished, %d not for a self-hosted runner\n",
				st.Repos, st.Runs, st.Jobs, len(tr.Jobs), st.NeverRan, st.Unfinished, st.NotSelfHosted)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&org, "org", "", "organization to read (required)")
	f.StringSliceVar(&repos, "repo", nil, "repositories to read, without the owner (repeatable; default: all the token can list)")
	f.StringVar(&since, "since", "7d", "start of the window: a duration back from now (7d, 36h) or a date or RFC 3339 time")
	f.StringVar(&until, "until", "", "end of the window, as --since (default: now)")
	f.StringVar(&apiURL, "api-url", "https://api.github.com/", "REST API base URL")
	f.StringVarP(&out, "out", "o", "-", "file to write (- for standard output)")
	f.BoolVar(&allJobs, "all-jobs", false, "keep jobs without the self-hosted label too")
	return cmd
}

// parseSince reads "7d", "36h", "90m", "2026-03-01" or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return time.Time{}, fmt.Errorf("%q: want a positive number of days such as 7d", v)
		}
		return now.AddDate(0, 0, -n), nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%q: want a positive duration", v)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration (7d, 36h), a date (2026-03-01) or an RFC 3339 time", v)
}
