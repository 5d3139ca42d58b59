package ux

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// column is what a test asserts of a printer column.
type column struct {
	Name     string
	Type     string
	Priority int32
}

// `kubectl get runnerpools` shows a pool's counts and readiness at a glance; -o wide adds
// the architecture its runners are pinned to, why it is not ready and where it registers. The Table is fetched from the API server
// exactly as kubectl asks for it.
func TestRunnerPoolColumns(t *testing.T) {
	ns := env.Namespace(t)
	w := &world{t: t, ns: ns, c: env.Client}
	pool := testutil.RunnerPool(ns, "linux-x64").URL("https://github.com/acme").MaxRunners(20).Obj()
	w.create(pool)
	pool.Status = v1alpha1.RunnerPoolStatus{
		QueuedJobs: 3, DesiredRunners: 7, PendingRunners: 2, IdleRunners: 1, BusyRunners: 4, FailedRunners: 1,
		Platform: &v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes},
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "CredentialsSecretNotFound",
			Message: "credentials secret is missing", LastTransitionTime: metav1.Now(),
		}},
	}
	if err := env.Client.Status().Update(w.ctx(), pool); err != nil {
		t.Fatal(err)
	}

	table := getTable(t, "/apis/gantry.dev/v1alpha1/namespaces/"+ns+"/runnerpools")
	wantCols := []column{
		{"Name", "string", 0},
		{"Queued", "integer", 0}, {"Desired", "integer", 0}, {"Pending", "integer", 0}, {"Idle", "integer", 0},
		{"Busy", "integer", 0}, {"Failed", "integer", 0}, {"Outdated", "integer", 1}, {"Warm", "integer", 1}, {"Arch", "string", 1}, {"Max", "integer", 0},
		{"Ready", "string", 0}, {"Reason", "string", 1}, {"URL", "string", 1},
		{"Age", "date", 0},
	}
	if diff := cmp.Diff(wantCols, columns(table)); diff != "" {
		t.Errorf("runnerpool columns (-want +got):\n%s", diff)
	}
	for _, c := range table.ColumnDefinitions[1 : len(table.ColumnDefinitions)-1] {
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	want := []any{"linux-x64", 3.0, 7.0, 2.0, 1.0, 4.0, 1.0, 0.0, nil, "arm64", 20.0, "False", "CredentialsSecretNotFound", "https://github.com/acme"}
	if diff := cmp.Diff(want, cells[:len(cells)-1]); diff != "" {
		t.Errorf("the pool's row (-want +got):\n%s", diff)
	}
	if age, _ := cells[len(cells)-1].(string); age == "" {
		t.Errorf("AGE cell = %v, want a duration like 5s", cells[len(cells)-1])
	}
	checkDocumented(t, "runnerpools", table)
}

// `kubectl get runners` shows each runner's pool, phase, job and failure reason; -o
// wide adds the job's repository and the message that says what to check.
func TestRunnerColumns(t *testing.T) {
	ns := env.Namespace(t)
	w := &world{t: t, ns: ns, c: env.Client}
	busy := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-b7k2q"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	failed := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-f4x9z"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	pending := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-p2m8w"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	starting := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-s5t3v"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	idle := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-i6d1e"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	killed := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64-k3l1d"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux-x64"}}
	for _, r := range []*v1alpha1.Runner{busy, failed, pending, starting, idle, killed} {
		w.create(r)
	}
	busy.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerBusy, Job: &v1alpha1.RunnerJob{ID: 4242, RunID: 77, Repository: "acme/api", Workflow: "ci"},
		TemplateHash: "0123456789abcdef", Outdated: true, NodeName: "node-3"}
	failed.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerFailed, Reason: v1alpha1.ReasonImagePullFailed,
		Message: `the runner image could not be pulled for 2m: Back-off pulling image "ghcr.io/acme/runner:nope"`}
	pending.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerPending, Message: "waiting for GitHub's rate limit to reset"}
	onlineCond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: runner.ConditionOnline, Status: status, Reason: reason, Message: "m", LastTransitionTime: metav1.Now()}}
	}
	starting.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerPending, Conditions: onlineCond(metav1.ConditionFalse, "WaitingForGitHub")}
	idle.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerIdle, Conditions: onlineCond(metav1.ConditionTrue, "Online")}
	killed.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerFailed, Reason: v1alpha1.ReasonNodeDeleted, NodeName: "spot-1",
		Job: &v1alpha1.RunnerJob{ID: 4343, RunID: 78, Repository: "acme/api"}, Rerun: &v1alpha1.RunnerRerun{State: v1alpha1.RerunWaiting}}
	for _, r := range []*v1alpha1.Runner{busy, failed, pending, starting, idle, killed} {
		if err := env.Client.Status().Update(w.ctx(), r); err != nil {
			t.Fatal(err)
		}
	}

	table := getTable(t, "/apis/gantry.dev/v1alpha1/namespaces/"+ns+"/runners")
	wantCols := []column{
		{"Name", "string", 0}, {"Pool", "string", 0}, {"Phase", "string", 0}, {"Online", "string", 0}, {"Job", "integer", 0},
		{"Repository", "string", 1}, {"Reason", "string", 0}, {"Node", "string", 1}, {"Rerun", "string", 1},
		{"Outdated", "boolean", 0}, {"Message", "string", 1}, {"Age", "date", 0},
	}
	if diff := cmp.Diff(wantCols, columns(table)); diff != "" {
		t.Errorf("runner columns (-want +got):\n%s", diff)
	}
	rows := map[string][]any{}
	for _, r := range table.Rows {
		rows[r.Cells[0].(string)] = r.Cells[1 : len(r.Cells)-1]
	}
	for name, want := range map[string][]any{
		busy.Name:     {"linux-x64", "Busy", nil, 4242.0, "acme/api", nil, "node-3", nil, true, nil},
		failed.Name:   {"linux-x64", "Failed", nil, nil, nil, "ImagePullFailed", nil, nil, nil, failed.Status.Message},
		pending.Name:  {"linux-x64", "Pending", nil, nil, nil, nil, nil, nil, nil, "waiting for GitHub's rate limit to reset"},
		starting.Name: {"linux-x64", "Pending", "False", nil, nil, nil, nil, nil, nil, nil},
		idle.Name:     {"linux-x64", "Idle", "True", nil, nil, nil, nil, nil, nil, nil},
		killed.Name:   {"linux-x64", "Failed", nil, 4343.0, "acme/api", "NodeDeleted", "spot-1", "Waiting", nil, nil},
	} {
		if diff := cmp.Diff(want, rows[name]); diff != "" {
			t.Errorf("runner %s's row (-want +got):\n%s", name, diff)
		}
	}
	checkDocumented(t, "runners", table)
}

// getTable fetches a list as kubectl does: as a meta.k8s.io/v1 Table.
func getTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as Table: %s: %s", path, resp.Status, body)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		t.Fatal(err)
	}
	if table.Kind != "Table" {
		t.Fatalf("GET %s answered a %s, not a Table", path, table.Kind)
	}
	return table
}

func columns(table *metav1.Table) []column {
	var out []column
	for _, c := range table.ColumnDefinitions {
		out = append(out, column{c.Name, c.Type, c.Priority})
	}
	return out
}

// checkDocumented asserts that docs/runnerpool.md names the columns kubectl prints,
// with and without -o wide, as they really are.
func checkDocumented(t *testing.T, resource string, table *metav1.Table) {
	t.Helper()
	var normal, wide []string
	for _, c := range table.ColumnDefinitions[1:] {
		if c.Priority == 0 {
			normal = append(normal, strings.ToUpper(c.Name))
		} else {
			wide = append(wide, strings.ToUpper(c.Name))
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runnerpool.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("`kubectl get %s` shows `%s`", resource, strings.Join(normal, " ")),
		fmt.Sprintf("`-o wide` adds `%s`", strings.Join(wide, " ")),
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/runnerpool.md does not say %q", want)
		}
	}
}
