package github

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// This file renders model objects as GitHub's JSON. api is the API base URL the client
// used (root or root/api/v3), html the web root; both only shape the *_url fields.

const timeLayout = "2006-01-02T15:04:05Z"

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }

func tsPtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := ts(t)
	return &s
}

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", kind, id))
}

type urls struct{ api, html string }

func userJSON(u urls, login string, id int64, typ string) map[string]any {
	api := u.api + "/users/" + login
	return map[string]any{
		"login":               login,
		"id":                  id,
		"node_id":             nodeID(typ, id),
		"avatar_url":          u.html + "/avatars/u/" + strconv.FormatInt(id, 10),
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            u.html + "/" + login,
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
		"type":                typ,
		"site_admin":          false,
	}
}

func orgJSON(u urls, o *org) map[string]any {
	api := u.api + "/orgs/" + o.login
	return map[string]any{
		"login":              o.login,
		"id":                 o.id,
		"node_id":            nodeID("Organization", o.id),
		"url":                api,
		"html_url":           u.html + "/" + o.login,
		"repos_url":          api + "/repos",
		"events_url":         api + "/events",
		"hooks_url":          api + "/hooks",
		"issues_url":         api + "/issues",
		"members_url":        api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}",
		"avatar_url":         u.html + "/avatars/u/" + strconv.FormatInt(o.id, 10),
		"description":        nil,
	}
}

func enterpriseJSON(u urls, e *enterprise) map[string]any {
	return map[string]any{
		"id":          e.id,
		"node_id":     nodeID("Enterprise", e.id),
		"name":        e.name,
		"slug":        e.slug,
		"html_url":    u.html + "/enterprises/" + e.slug,
		"created_at":  ts(e.created),
		"updated_at":  ts(e.created),
		"avatar_url":  u.html + "/avatars/e/" + strconv.FormatInt(e.id, 10),
		"description": nil,
		"website_url": nil,
	}
}

// repoJSON renders a repository; full adds the fields of the full repository object
// (webhook payloads), the rest is GitHub's minimal-repository.
func repoJSON(u urls, r *repo, full bool) map[string]any {
	api := u.api + "/repos/" + r.fullName()
	html := u.html + "/" + r.fullName()
	visibility := "public"
	if r.private {
		visibility = "private"
	}
	m := map[string]any{
		"id":                r.id,
		"node_id":           nodeID("Repository", r.id),
		"name":              r.name,
		"full_name":         r.fullName(),
		"private":           r.private,
		"owner":             userJSON(u, r.org.login, r.org.id, "Organization"),
		"html_url":          html,
		"description":       nil,
		"fork":              false,
		"url":               api,
		"forks_url":         api + "/forks",
		"keys_url":          api + "/keys{/key_id}",
		"collaborators_url": api + "/collaborators{/collaborator}",
		"teams_url":         api + "/teams",
		"hooks_url":         api + "/hooks",
		"issue_events_url":  api + "/issues/events{/number}",
		"events_url":        api + "/events",
		"assignees_url":     api + "/assignees{/user}",
		"branches_url":      api + "/branches{/branch}",
		"tags_url":          api + "/tags",
		"blobs_url":         api + "/git/blobs{/sha}",
		"git_tags_url":      api + "/git/tags{/sha}",
		"git_refs_url":      api + "/git/refs{/sha}",
		"trees_url":         api + "/git/trees{/sha}",
		"statuses_url":      api + "/statuses/{sha}",
		"languages_url":     api + "/languages",
		"stargazers_url":    api + "/stargazers",
		"contributors_url":  api + "/contributors",
		"subscribers_url":   api + "/subscribers",
		"subscription_url":  api + "/subscription",
		"commits_url":       api + "/commits{/sha}",
		"git_commits_url":   api + "/git/commits{/sha}",
		"comments_url":      api + "/comments{/number}",
		"issue_comment_url": api + "/issues/comments{/number}",
		"contents_url":      api + "/contents/{+path}",
		"compare_url":       api + "/compare/{base}...{head}",
		"merges_url":        api + "/merges",
		"archive_url":       api + "/{archive_format}{/ref}",
		"downloads_url":     api + "/downloads",
		"issues_url":        api + "/issues{/number}",
		"pulls_url":         api + "/pulls{/number}",
		"milestones_url":    api + "/milestones{/number}",
		"notifications_url": api + "/notifications{?since,all,participating}",
		"labels_url":        api + "/labels{/name}",
		"releases_url":      api + "/releases{/id}",
		"deployments_url":   api + "/deployments",
	}
	if !full {
		return m
	}
	more := map[string]any{
		"created_at":                  ts(r.created),
		"updated_at":                  ts(r.created),
		"pushed_at":                   ts(r.created),
		"git_url":                     "git://" + hostOf(u.html) + "/" + r.fullName() + ".git",
		"ssh_url":                     "git@" + hostOf(u.html) + ":" + r.fullName() + ".git",
		"clone_url":                   html + ".git",
		"svn_url":                     html,
		"homepage":                    nil,
		"size":                        0,
		"stargazers_count":            0,
		"watchers_count":              0,
		"language":                    nil,
		"has_issues":                  true,
		"has_projects":                true,
		"has_downloads":               true,
		"has_wiki":                    true,
		"has_pages":                   false,
		"has_discussions":             false,
		"forks_count":                 0,
		"mirror_url":                  nil,
		"archived":                    false,
		"disabled":                    false,
		"open_issues_count":           0,
		"license":                     nil,
		"allow_forking":               true,
		"is_template":                 false,
		"web_commit_signoff_required": false,
		"topics":                      []string{},
		"visibility":                  visibility,
		"forks":                       0,
		"open_issues":                 0,
		"watchers":                    0,
		"default_branch":              "main",
		"custom_properties":           map[string]any{},
	}
	for k, v := range more {
		m[k] = v
	}
	return m
}

func hostOf(u string) string {
	for _, p := range []string{"https://", "http://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			return u[len(p):]
		}
	}
	return u
}

// runnerLabelJSON is one label of a runner.
type runnerLabelJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// runnerJSON is GitHub's runner object.
type runnerJSON struct {
	ID            int64             `json:"id"`
	RunnerGroupID int64             `json:"runner_group_id,omitempty"`
	Name          string            `json:"name"`
	OS            string            `json:"os"`
	Status        string            `json:"status"`
	Busy          bool              `json:"busy"`
	Ephemeral     bool              `json:"ephemeral"`
	Labels        []runnerLabelJSON `json:"labels"`
}

func (st *state) renderRunner(r *runner) runnerJSON {
	status := "offline"
	if r.online {
		status = "online"
	}
	out := runnerJSON{ID: r.id, Name: r.name, OS: r.os, Status: status, Busy: r.busy(), Ephemeral: r.ephemeral,
		Labels: make([]runnerLabelJSON, 0, len(r.labels))}
	if r.group != nil {
		out.RunnerGroupID = r.group.id
	}
	for _, l := range r.labels {
		out.Labels = append(out.Labels, runnerLabelJSON{ID: st.labelID(l), Name: l, Type: r.labelTypes[l]})
	}
	return out
}

// groupJSON renders a runner group; owner is the path of its owner ("orgs/acme").
func groupJSON(u urls, owner string, g *runnerGroup, inherited bool) map[string]any {
	m := map[string]any{
		"id":                              g.id,
		"name":                            g.name,
		"visibility":                      g.visibility,
		"default":                         g.isDefault,
		"runners_url":                     fmt.Sprintf("%s/%s/actions/runner-groups/%d/runners", u.api, owner, g.id),
		"inherited":                       inherited,
		"allows_public_repositories":      g.allowsPublic,
		"restricted_to_workflows":         false,
		"selected_workflows":              []string{},
		"workflow_restrictions_read_only": false,
	}
	return m
}

func (st *state) jobJSON(u urls, j *job) map[string]any {
	r := j.repo()
	api := u.api + "/repos/" + r.fullName()
	started := j.started
	if started.IsZero() {
		started = j.created
	}
	m := map[string]any{
		"id":                j.id,
		"run_id":            j.run.id,
		"run_url":           fmt.Sprintf("%s/actions/runs/%d", api, j.run.id),
		"run_attempt":       j.attempt,
		"node_id":           nodeID("WorkflowJob", j.id),
		"head_sha":          j.run.headSHA,
		"url":               fmt.Sprintf("%s/actions/jobs/%d", api, j.id),
		"html_url":          fmt.Sprintf("%s/%s/actions/runs/%d/job/%d", u.html, r.fullName(), j.run.id, j.id),
		"status":            j.status,
		"conclusion":        nilIfEmpty(j.conclusion),
		"created_at":        ts(j.created),
		"started_at":        ts(started),
		"completed_at":      tsPtr(j.completed),
		"name":              j.name,
		"steps":             []any{},
		"check_run_url":     fmt.Sprintf("%s/check-runs/%d", api, j.id),
		"labels":            j.labels,
		"runner_id":         nil,
		"runner_name":       nil,
		"runner_group_id":   nil,
		"runner_group_name": nil,
		"workflow_name":     j.run.name,
		"head_branch":       j.run.headBranch,
	}
	if j.status != StatusQueued && j.runnerID != 0 {
		m["runner_id"] = j.runnerID
		m["runner_name"] = j.runnerName
		m["runner_group_id"] = j.groupID
		m["runner_group_name"] = j.groupName
	}
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// runJSON is the run as of its latest attempt.
func (st *state) runJSON(u urls, wr *workflowRun) map[string]any {
	return st.runAttemptJSON(u, wr, wr.graph.attempt())
}

// runAttemptJSON is the run as of its attempt n: its status then, when it started and
// the attempt before it.
func (st *state) runAttemptJSON(u urls, wr *workflowRun, n int) map[string]any {
	r := wr.repo
	api := fmt.Sprintf("%s/repos/%s/actions/runs/%d", u.api, r.fullName(), wr.id)
	status, conclusion := wr.graph.statusAt(n)
	actor := userJSON(u, wr.actor, 1, "User")
	attempt := wr.graph.attempts[n-1]
	updated := wr.updated
	if n < wr.graph.attempt() {
		updated = attempt.done
	}
	var previous any
	if n > 1 {
		previous = fmt.Sprintf("%s/attempts/%d", api, n-1)
	}
	return map[string]any{
		"id":                   wr.id,
		"name":                 wr.name,
		"node_id":              nodeID("WorkflowRun", wr.id),
		"check_suite_id":       wr.id,
		"check_suite_node_id":  nodeID("CheckSuite", wr.id),
		"head_branch":          wr.headBranch,
		"head_sha":             wr.headSHA,
		"path":                 wr.path,
		"display_title":        wr.name,
		"run_number":           wr.number,
		"run_attempt":          n,
		"event":                wr.event,
		"status":               status,
		"conclusion":           nilIfEmpty(conclusion),
		"workflow_id":          wr.workflowID,
		"url":                  api,
		"html_url":             fmt.Sprintf("%s/%s/actions/runs/%d", u.html, r.fullName(), wr.id),
		"pull_requests":        []any{},
		"created_at":           ts(wr.created),
		"updated_at":           ts(updated),
		"run_started_at":       ts(attempt.started),
		"actor":                actor,
		"triggering_actor":     actor,
		"jobs_url":             api + "/jobs",
		"logs_url":             api + "/logs",
		"check_suite_url":      fmt.Sprintf("%s/repos/%s/check-suites/%d", u.api, r.fullName(), wr.id),
		"artifacts_url":        api + "/artifacts",
		"cancel_url":           api + "/cancel",
		"rerun_url":            api + "/rerun",
		"previous_attempt_url": previous,
		"workflow_url":         fmt.Sprintf("%s/repos/%s/actions/workflows/%d", u.api, r.fullName(), wr.workflowID),
		"head_commit":          nil,
		"repository":           repoJSON(u, r, false),
		"head_repository":      repoJSON(u, r, false),
		"head_repository_id":   r.id,
	}
}

func appJSON(u urls, a *app) map[string]any {
	return map[string]any{
		"id":           a.id,
		"slug":         a.slug,
		"client_id":    a.clientID,
		"node_id":      nodeID("Integration", a.id),
		"owner":        userJSON(u, a.owner.login, a.owner.id, "Organization"),
		"name":         a.name,
		"description":  nil,
		"external_url": u.html,
		"html_url":     u.html + "/apps/" + a.slug,
		"created_at":   ts(a.created),
		"updated_at":   ts(a.created),
		"permissions":  installationPermissions(),
		"events":       []string{"workflow_job"},
	}
}

func installationPermissions() map[string]string {
	return map[string]string{
		"actions":                          "read",
		"administration":                   "write",
		"metadata":                         "read",
		"organization_self_hosted_runners": "write",
	}
}

// accountJSON is an installation's account. GitHub's description of GET
// /app/installations combines simple-user and enterprise with allOf, so the account
// carries the enterprise fields (name, slug, created_at, updated_at) as well.
func accountJSON(u urls, o *org) map[string]any {
	m := userJSON(u, o.login, o.id, "Organization")
	m["name"], m["slug"] = o.login, o.login
	m["created_at"], m["updated_at"] = ts(o.created), ts(o.created)
	return m
}

func installationJSON(u urls, in *installation) map[string]any {
	return map[string]any{
		"id":                        in.id,
		"app_id":                    in.app.id,
		"app_slug":                  in.app.slug,
		"client_id":                 in.app.clientID,
		"target_id":                 in.org.id,
		"target_type":               "Organization",
		"single_file_name":          nil,
		"repository_selection":      in.selection,
		"access_tokens_url":         fmt.Sprintf("%s/app/installations/%d/access_tokens", u.api, in.id),
		"html_url":                  fmt.Sprintf("%s/organizations/%s/settings/installations/%d", u.html, in.org.login, in.id),
		"repositories_url":          u.api + "/installation/repositories",
		"events":                    []string{"workflow_job"},
		"account":                   accountJSON(u, in.org),
		"permissions":               installationPermissions(),
		"created_at":                ts(in.created),
		"updated_at":                ts(in.created),
		"suspended_by":              nil,
		"suspended_at":              nil,
		"has_multiple_single_files": false,
		"single_file_paths":         []string{},
	}
}
