package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ListAllRunners sends each page's ETag back: unchanged pages come back 304 and are
// served from the client's copy; a changed page is read again.
func TestListAllRunnersIsConditional(t *testing.T) {
	f := newFakeGitHub(t)
	all := []map[string]any{}
	for i := 1; i <= 150; i++ {
		all = append(all, runnerJSON(int64(i), fmt.Sprintf("r%d", i), "offline", false, "self-hosted"))
	}
	version := map[int]int{1: 1, 2: 1} // page → content version
	var got304 int
	f.handle("GET /repos/acme/app/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		per, _ := strconv.Atoi(q.Get("per_page"))
		page, _ := strconv.Atoi(q.Get("page"))
		etag := fmt.Sprintf(`W/"p%d-v%d"`, page, version[page])
		if r.Header.Get("If-None-Match") == etag {
			got304++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if page == 1 {
			next := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: url.Values{"per_page": {strconv.Itoa(per)}, "page": {"2"}}.Encode()}
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
		}
		w.Header().Set("ETag", etag)
		lo, hi := (page-1)*per, min(page*per, len(all))
		writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), "runners": all[lo:hi]})
	})
	c := newTokenClient(t, "ns/listall", newClock())
	scope := f.scope("acme/app")
	list := func() []Runner {
		t.Helper()
		got, pages, err := c.ListAllRunners(context.Background(), scope)
		if err != nil {
			t.Fatalf("ListAllRunners() error = %v", err)
		}
		if pages != 2 || len(got) != len(all) {
			t.Fatalf("ListAllRunners() = %d runners in %d pages, want %d in 2", len(got), pages, len(all))
		}
		return got
	}

	first := list()
	if got304 != 0 {
		t.Fatalf("the first listing got %d answers 304", got304)
	}
	if diff := cmp.Diff(first, list()); diff != "" {
		t.Errorf("unchanged listing (-first +second):\n%s", diff)
	}
	if got304 != 2 {
		t.Errorf("unchanged listing: %d answers 304, want 2 (both pages)", got304)
	}

	all[120]["status"] = "online"
	version[2]++
	third := list()
	if got304 != 3 {
		t.Errorf("after page 2 changed: %d answers 304 in all, want 3 (page 1 only)", got304)
	}
	if third[120].Status != RunnerOnline || third[0].Status != RunnerOffline {
		t.Errorf("after page 2 changed: runner 121 %s, runner 1 %s; want online, offline", third[120].Status, third[0].Status)
	}
	want := []string{
		"GET /repos/acme/app/actions/runners?per_page=100&page=1", "GET /repos/acme/app/actions/runners?per_page=100&page=2",
	}
	for i, call := range f.gotCalls() {
		if call != want[i%2] {
			t.Errorf("call %d = %q, want %q", i, call, want[i%2])
		}
	}
}
