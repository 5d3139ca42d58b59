package reliability

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// needles are the secrets a scenario used — GitHub tokens, webhook secrets, JIT
// configurations, runner credentials, private keys — each with the forms in which it
// could leak: as is, base64-encoded (how a Secret's data, or a careless annotation,
// holds it), and a 24-character piece of its middle (a truncated log line).
type needles struct {
	mu sync.Mutex
	// forms maps each searchable form to the label of its secret (never the value).
	forms map[string]string
}

func newNeedles() *needles { return &needles{forms: map[string]string{}} }

// allNeedles is every needle of every scenario, for redact.
var allNeedles = newNeedles()

func (n *needles) add(label, value string) {
	if len(value) < 12 {
		return
	}
	for _, nn := range []*needles{n, allNeedles} {
		if nn == allNeedles && n == allNeedles {
			continue
		}
		nn.mu.Lock()
		for _, f := range forms(value) {
			nn.forms[f] = label
		}
		nn.mu.Unlock()
	}
}

func forms(value string) []string {
	out := []string{value, base64.StdEncoding.EncodeToString([]byte(value)), base64.RawURLEncoding.EncodeToString([]byte(value))}
	if len(value) >= 48 {
		mid := len(value) / 2
		out = append(out, value[mid-12:mid+12])
	}
	return out
}

// find returns the labels of the secrets s contains.
func (n *needles) find(s string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var found []string
	seen := map[string]bool{}
	for f, label := range n.forms {
		if !seen[label] && strings.Contains(s, f) {
			seen[label] = true
			found = append(found, label)
		}
	}
	sort.Strings(found)
	return found
}

func (n *needles) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	labels := map[string]bool{}
	for _, l := range n.forms {
		labels[l] = true
	}
	return len(labels)
}

// redact replaces every known secret in s, for test output.
func redact(s string) string {
	allNeedles.mu.Lock()
	defer allNeedles.mu.Unlock()
	for f, label := range allNeedles.forms {
		s = strings.ReplaceAll(s, f, "<redacted "+label+">")
	}
	return s
}

// leak is one place a secret was found: where, and which secret — never its value.
type leak struct {
	Where  string `json:"where"`
	Secret string `json:"secret"`
}

// scanResult is what a scan looked at and found.
type scanResult struct {
	Objects, LogLines, MetricsLines, AuditLines int
	// Home counts the secrets found in Secrets, where they belong: proof that the
	// scan reads what it should.
	Home  int
	Leaks []leak
}

// scanObjects lists every object of every listable resource in the cluster and looks
// for the needles in each — specs, statuses, metadata (annotations, labels) and
// events alike. Secrets are where secrets belong: hits there count as Home.
func scanObjects(ctx context.Context, n *needles, res *scanResult) error {
	cfg := rest.CopyConfig(cp.cfg)
	cfg.WarningHandler = rest.NoWarnings{} // deprecated kinds are scanned too, quietly
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	resources, err := kube.Discovery().ServerPreferredResources()
	if err != nil {
		return fmt.Errorf("discovering resources: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, list := range resources {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return err
		}
		for _, r := range list.APIResources {
			// events.k8s.io serves the core events again: scanned once, as core.
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "list") || gv.Group == "events.k8s.io" {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for _, it := range items.Items {
				res.Objects++
				b, err := json.Marshal(it.Object)
				if err != nil {
					return err
				}
				found := n.find(string(b))
				if len(found) == 0 {
					continue
				}
				if r.Kind == "Secret" && gv.Group == "" {
					res.Home += len(found)
					continue
				}
				for _, f := range found {
					res.Leaks = append(res.Leaks, leak{Where: fmt.Sprintf("%s %s/%s", r.Kind, it.GetNamespace(), it.GetName()), Secret: f})
				}
			}
		}
	}
	return nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// scanLines looks for the needles in each line; what names the source in a leak.
func scanLines(n *needles, what string, lines []string, res *scanResult, counter *int) {
	for i, l := range lines {
		*counter++
		for _, f := range n.find(l) {
			res.Leaks = append(res.Leaks, leak{Where: fmt.Sprintf("%s line %d", what, i+1), Secret: f})
		}
	}
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}

// scan looks everywhere a secret could leak to after a scenario: every object in the
// cluster, every log line of the scenario's controllers, every metrics scrape, and the
// API server's audit log.
func (w *world) scan() scanResult {
	w.t.Helper()
	var res scanResult
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := scanObjects(ctx, w.secrets, &res); err != nil {
		w.t.Fatalf("scanning objects: %v", err)
	}
	for _, p := range w.controllers() {
		p.scrapeQuietly()
		scanLines(w.secrets, "log of controller "+p.opts.name, p.logLines(), &res, &res.LogLines)
		for i, m := range p.scrapes() {
			scanLines(w.secrets, fmt.Sprintf("metrics scrape %d of controller %s", i+1, p.opts.name), strings.Split(m, "\n"), &res, &res.MetricsLines)
		}
	}
	audit, err := readLines(cp.auditLog)
	if err != nil {
		w.t.Fatalf("reading the audit log: %v", err)
	}
	scanLines(w.secrets, "API server audit log", audit, &res, &res.AuditLines)
	return res
}

// TestSecretScanFindsPlantedSecrets is the scan's positive control: a secret planted in
// an object's annotation (base64-encoded), an event's message, a log line (truncated)
// and a metrics label is found in each place, and nothing else is.
func TestSecretScanFindsPlantedSecrets(t *testing.T) {
	w := newWorld(t, worldOptions{})
	planted := "ghs_" + randomHex(30)
	n := newNeedles()
	n.add("planted token", planted)
	other := newNeedles()
	other.add("never used", "ghp_"+randomHex(20))

	w.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "careless",
		Annotations: map[string]string{"example.com/config": base64.StdEncoding.EncodeToString([]byte(planted))}}})
	w.create(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: w.ns, Name: "careless.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: w.ns, Name: "careless"},
		Reason:         "Leaky", Message: "registered with token " + planted, Type: corev1.EventTypeNormal,
	})
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "home"}, Data: map[string][]byte{"token": []byte(planted)}})
	logLine := []string{`{"level":"info","msg":"Registering","token":"` + planted[:len(planted)-5] + `…"}`}
	metricsLines := []string{`gantry_example_total{token="` + planted + `"} 1`}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res scanResult
	if err := scanObjects(ctx, n, &res); err != nil {
		t.Fatal(err)
	}
	scanLines(n, "log", logLine, &res, &res.LogLines)
	scanLines(n, "metrics", metricsLines, &res, &res.MetricsLines)
	var where []string
	for _, l := range res.Leaks {
		where = append(where, l.Where)
	}
	sort.Strings(where)
	want := []string{"ConfigMap " + w.ns + "/careless", "Event " + w.ns + "/careless.1", "log line 1", "metrics line 1"}
	if strings.Join(where, "|") != strings.Join(want, "|") {
		t.Errorf("the planted secret was found in %q, want %q", where, want)
	}
	if res.Home != 1 {
		t.Errorf("found the planted secret in %d Secrets, want 1 (its home)", res.Home)
	}
	var none scanResult
	if err := scanObjects(ctx, other, &none); err != nil {
		t.Fatal(err)
	}
	if len(none.Leaks) != 0 || none.Home != 0 {
		t.Errorf("a secret used nowhere was found: %+v", none)
	}
	w.fig.measure("planted_places_found", float64(len(res.Leaks)))
	w.fig.Finished = true
	w.fig.Notes = append(w.fig.Notes, "positive control of the secret scan: a planted token is found in an annotation (base64), an event, a truncated log line and a metrics label")
	w.fig.write()
}
