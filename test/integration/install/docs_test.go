package install

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// checkoutCopy are the parts of the checkout the docs' commands read, copied into each
// scenario's working directory.
var checkoutCopy = []string{"charts", "config", "examples", filepath.Join("hack", "release")}

// docWorld is what one docs scenario runs against: an empty cluster, the GitHub
// simulator serving TLS on loopback as the organization my-org with a GitHub App
// installed on it, and a working directory holding a copy of the chart and the
// kustomize bases (the paths the docs use), where the docs' files are written.
type docWorld struct {
	t       *testing.T
	dir     string // the blocks' working directory
	home    string
	binDir  string // kubectl and helm, first on PATH
	gantry  string
	cluster *docCluster
	sim     *simgithub.Sim
	simURL  string // https://127.0.0.1:PORT
	simCA   string // the simulator's certificate, PEM
	app     simgithub.App
	inst    simgithub.Installation
	// subst maps each placeholder (YOUR_…) to the value the test uses.
	subst map[string]string
	// out holds the stdout of each block run, by ref.
	out    map[string]string
	blocks map[string]docBlock
	ctrl   *docController
}

// The organization, repository and fixtures every scenario uses.
const (
	docOrg  = "my-org"
	docRepo = "my-org/hello"
)

// docKeyFile is the private-key file the docs' YOUR_PRIVATE_KEY_FILE names: the test
// writes the simulator App's key there, as a user saves the .pem GitHub gives them.
const docKeyFile = "my-app.private-key.pem"

// docCAFile is the private CA file the docs' YOUR_CA_FILE names (a GHES host's): the
// test writes the simulator's certificate there.
const docCAFile = "corp-ca.pem"

// docImage is the quickstart's image with the test's YOUR_REGISTRY: what every later
// step must keep.
const docImage = "registry.example.com/gantry:dev"

func newDocWorld(t *testing.T) *docWorld {
	t.Helper()
	base := t.TempDir()
	w := &docWorld{t: t, dir: filepath.Join(base, "checkout"), home: filepath.Join(base, "home"), binDir: filepath.Join(base, "bin"),
		gantry: docTools.gantry, out: map[string]string{}, blocks: loadDocBlocks(t)}
	for _, d := range []string{w.dir, w.home, w.binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range checkoutCopy {
		if err := copyTree(filepath.Join(root, sub), filepath.Join(w.dir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	for name, bin := range map[string]string{"kubectl": docTools.kubectl, "helm": helmBin, "kustomize": kustomizeBin, "gantry": docTools.gantry} {
		if err := os.Symlink(bin, filepath.Join(w.binDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	w.cluster = startDocCluster(t, base)

	srv := httptest.NewUnstartedServer(nil)
	w.simURL = "https://" + srv.Listener.Addr().String()
	w.sim = simgithub.New(simgithub.Options{URL: w.simURL, RateLimits: simgithub.RateLimits{Disabled: true}})
	srv.Config.Handler = w.sim
	srv.StartTLS()
	t.Cleanup(func() { srv.Close(); w.sim.Close() })
	w.simCA = filepath.Join(base, "sim-ca.pem")
	if err := os.WriteFile(w.simCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := w.sim.CreateOrg(simgithub.OrgSpec{Login: docOrg})
	must(err)
	for _, repo := range []string{"hello", "api"} {
		_, err = w.sim.CreateRepo(simgithub.RepoSpec{Owner: docOrg, Name: repo})
		must(err)
	}
	w.app, err = w.sim.CreateApp(simgithub.AppSpec{Slug: "gantry-docs", Owner: docOrg})
	must(err)
	w.inst, err = w.sim.CreateInstallation(quickstartInstallation(t, w.app.ID))
	must(err)
	must(os.WriteFile(filepath.Join(w.dir, docKeyFile), []byte(w.app.PrivateKeyPEM), 0o600))
	// The docs' private CA (a GHES host's) is the simulator's: its certificate is
	// self-signed.
	caPEM, err := os.ReadFile(w.simCA)
	must(err)
	must(os.WriteFile(filepath.Join(w.dir, docCAFile), caPEM, 0o644))
	w.subst = docPlaceholders(w.simURL, w.app.ID, w.inst.ID, randomHex(t))
	t.Logf("docs world: GitHub simulator at %s (organization %s, App %d installed as %d); the App's key written to %s, its CA to %s; commands run in a copy of charts/, config/, examples/ and hack/release/, trusting that CA (SSL_CERT_FILE) as a user's machine trusts GitHub's",
		w.simURL, docOrg, w.app.ID, w.inst.ID, docKeyFile, docCAFile)
	return w
}

// docPlaceholders are the values the docs tests give the placeholders. Every key is a
// placeholder (TestDocsEditOnlyPlaceholders): the tests change nothing else of a block.
func docPlaceholders(simURL string, appID, installationID int64, webhookSecret string) map[string]string {
	return map[string]string{
		"YOUR_ORG":              docOrg,
		"YOUR_REPO":             "hello",
		"YOUR_APP_ID":           strconv.FormatInt(appID, 10),
		"YOUR_INSTALLATION_ID":  strconv.FormatInt(installationID, 10),
		"YOUR_PRIVATE_KEY_FILE": docKeyFile,
		"YOUR_WEBHOOK_SECRET":   webhookSecret,
		"YOUR_REGISTRY":         strings.TrimSuffix(docImage, "/gantry:dev"),
		"YOUR_WEBHOOK_HOST":     "gantry.example.com",
		"YOUR_INGRESS_CLASS":    "nginx",
		"YOUR_CA_FILE":          docCAFile,
		// troubleshooting.md's commands name a pool: the quickstart's scale-set pool.
		"YOUR_POOL": "gantry-linux",
		// and a credentials Secret: the docs' own.
		"YOUR_NAMESPACE": "ci",
		"YOUR_SECRET":    "github-app",
		// doctor.md binds its ClusterRole to a user.
		"YOUR_USER": docUser,
		// A release version (install.md's releases); the rehearsal gives the dry run's.
		"YOUR_VERSION": "1.2.3",
		// The one thing no placeholder stands for: GitHub itself. The docs' organization
		// URL, https://github.com/YOUR_ORG, is the simulator's organization.
		githubOrgURL: simURL + "/" + docOrg,
	}
}

// githubOrgURL is the organization URL the docs write, whose host only the simulator
// can play: the tests replace it whole.
const githubOrgURL = "https://github.com/YOUR_ORG"

// docUser is the user doctor.md's ClusterRole is bound to in the tests.
const docUser = "jane"

// placeholderRE is a placeholder: a word in capitals that starts with YOUR_.
var placeholderRE = regexp.MustCompile(`YOUR_[A-Z0-9_]*[A-Z0-9]`)

// fillPlaceholders replaces the placeholders of a block's text with values, and nothing
// else: the organization URL on github.com first, then each YOUR_ word. It fails on a
// placeholder it has no value for.
func fillPlaceholders(body string, values map[string]string) (string, []string, error) {
	var used []string
	if v, ok := values[githubOrgURL]; ok && strings.Contains(body, githubOrgURL) {
		body = strings.ReplaceAll(body, githubOrgURL, v)
		used = append(used, githubOrgURL)
	}
	var missing []string
	body = placeholderRE.ReplaceAllStringFunc(body, func(p string) string {
		v, ok := values[p]
		if !ok {
			missing = append(missing, p)
			return p
		}
		if !slices.Contains(used, p) {
			used = append(used, p)
		}
		return v
	})
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("placeholders %v have no value in the docs tests (docPlaceholders)", missing)
	}
	return body, used, nil
}

func randomHex(t *testing.T) string {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// substitute returns a block's text with its placeholders filled in, and logs each.
func (w *docWorld) substitute(t *testing.T, b docBlock) string {
	t.Helper()
	body, used, err := fillPlaceholders(b.body, w.subst)
	if err != nil {
		t.Fatalf("%s: %v", b.where(), err)
	}
	for _, p := range used {
		t.Logf("%s: placeholder %q → %q", b.ref(), p, w.subst[p])
	}
	return body
}

// runBlock runs one documented block as a user would: sh blocks with bash (-e, -o
// pipefail) in the working directory, with kubectl and helm first on PATH and
// KUBECONFIG set; a block that is a file is written to it. It returns stdout.
func (w *docWorld) runBlock(t *testing.T, ref string) string {
	t.Helper()
	b, ok := w.blocks[ref]
	if !ok {
		t.Fatalf("no doc marks a block %s", ref)
	}
	body := w.substitute(t, b)
	if !isShell(b.lang) {
		path := filepath.Join(w.dir, b.fileName())
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: wrote %s", ref, b.fileName())
		return ""
	}
	t.Logf("%s:\n%s", ref, indent(body))
	out, stderr, err := w.shell(t, body)
	if err != nil {
		t.Fatalf("%s, as documented at %s, failed: %v\nstdout:\n%s\nstderr:\n%s", ref, b.where(), err, out, stderr)
	}
	w.out[ref] = out
	return out
}

// shell runs a script the way runBlock does; the test's own commands (a user's
// mistake, say) go through it too.
func (w *docWorld) shell(t *testing.T, script string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = w.dir
	cmd.Env = w.shellEnv()
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// shellEnv is the environment the blocks run in: kubectl, helm, kustomize and gantry
// first on PATH, the test cluster's KUBECONFIG, and the simulator's CA trusted.
func (w *docWorld) shellEnv() []string {
	return []string{
		"PATH=" + w.binDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + w.home, "KUBECONFIG=" + w.cluster.kubeconfig, "LANG=C.UTF-8", "SSL_CERT_FILE=" + w.simCA,
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// docStep is a documented block (doc: its ref) or something the test does between
// blocks (what and act): what a person does on GitHub, or checks.
type docStep struct {
	doc  string
	what string
	act  func(t *testing.T, w *docWorld)
	// runs are the blocks an action runs itself (a watch in the background).
	runs []string
}

type docScenario struct {
	name  string
	steps []docStep
}

func block(ref string) docStep { return docStep{doc: ref} }

func action(what string, act func(t *testing.T, w *docWorld)) docStep {
	return docStep{what: what, act: act}
}

// TestDocs runs each scenario's documented commands in order against a cluster of its
// own and the GitHub simulator; see docScenarios.
func TestDocs(t *testing.T) {
	for _, sc := range docScenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			w := newDocWorld(t)
			for _, st := range sc.steps {
				if st.doc != "" {
					w.runBlock(t, st.doc)
					continue
				}
				t.Logf("test: %s", st.what)
				before := checkoutDigest(t, w.dir)
				st.act(t, w)
				// What the test does between blocks never edits the checkout: only the
				// documented commands may.
				if after := checkoutDigest(t, w.dir); after != before {
					t.Fatalf("the test's step %q changed the working copy of %v: only a documented block may", st.what, checkoutCopy)
				}
			}
			w.noCallRefused(t)
			t.Logf("scenario %s took %s", sc.name, time.Since(start).Round(time.Second))
		})
	}
}

// checkoutDigest hashes every file (path and content) of the working copy's checkout
// parts (checkoutCopy).
func checkoutDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	for _, sub := range checkoutCopy {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d\n", p, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Actions shared by the scenarios.

// startController runs the controller of the installed Deployment.
func startController(ns, name string) docStep {
	return action("run the controller as Deployment "+ns+"/"+name+" would", func(t *testing.T, w *docWorld) {
		if w.ctrl != nil {
			w.ctrl.stop()
		}
		w.ctrl = runDeployment(t, w, ns, name)
	})
}

// restartController models a rollout: the old process stops, and one runs with the
// Deployment as it is now.
func restartController(ns, name string) docStep {
	s := startController(ns, name)
	s.what = "roll the controller: run it again from Deployment " + ns + "/" + name + " as it is now"
	return s
}

// githubWebhook points the App's webhook at the running controller with the secret a
// block printed (secretRef) or the placeholder the docs use, as the quickstart has the
// user do on the App's settings page.
func githubWebhook(secretRef string) docStep {
	return action("point the App's webhook at the controller, with the documented secret", func(t *testing.T, w *docWorld) {
		secret := w.subst["YOUR_WEBHOOK_SECRET"]
		if secretRef != "" {
			secret = strings.TrimSpace(w.out[secretRef])
			if secret == "" {
				t.Fatalf("%s printed no webhook secret", secretRef)
			}
		}
		if _, err := w.sim.SetAppWebhook(w.app.ID, "http://"+w.ctrl.webhook+"/webhook", secret); err != nil {
			t.Fatal(err)
		}
	})
}

func poolReady(ns, name string) docStep {
	return action("wait for RunnerPool "+ns+"/"+name+" Ready", func(t *testing.T, w *docWorld) {
		waitFor(t, "pool "+ns+"/"+name+" Ready", 2*time.Minute, func(ctx context.Context) (bool, string) {
			var p v1alpha1.RunnerPool
			if err := w.cluster.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation, fmt.Sprintf("conditions %+v", p.Status.Conditions)
		})
	})
}

// jobGetsRunner queues the quickstart's workflow job and waits for its runner:
// registered on GitHub, a Runner and its pod in ns (no kubelet runs the pod).
func jobGetsRunner(ns string) docStep {
	return action("queue a [self-hosted, linux, x64] job in my-org/hello; wait for its runner", func(t *testing.T, w *docWorld) {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: docRepo, Labels: []string{"self-hosted", "linux", "x64"}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a runner registered on GitHub, with its Runner and pod in "+ns, 2*time.Minute, func(ctx context.Context) (bool, string) {
			var runners v1alpha1.RunnerList
			if err := w.cluster.c.List(ctx, &runners, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			pods := 0
			for _, r := range runners.Items {
				var pod metav1.PartialObjectMetadata
				pod.SetGroupVersionKind(corev1Pod)
				if w.cluster.c.Get(ctx, client.ObjectKeyFromObject(&r), &pod) == nil {
					pods++
				}
			}
			registered := len(w.sim.Runners())
			return len(runners.Items) == 1 && pods == 1 && registered == 1,
				fmt.Sprintf("%d Runners, %d pods, %d runners registered on GitHub", len(runners.Items), pods, registered)
		})
	})
}

// runnerPolicyIn waits for the runner NetworkPolicy the controller puts beside the pools
// of namespace ns (docs/security.md).
func runnerPolicyIn(ns string) docStep {
	return action("check the runner NetworkPolicy is in "+ns, func(t *testing.T, w *docWorld) {
		waitFor(t, "a runner NetworkPolicy in "+ns, time.Minute, func(ctx context.Context) (bool, string) {
			var l networkingv1.NetworkPolicyList
			if err := w.cluster.c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "gantry"}); err != nil {
				return false, err.Error()
			}
			for _, p := range l.Items {
				if p.Spec.PodSelector.MatchLabels["app.kubernetes.io/managed-by"] == "gantry" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d NetworkPolicies of Gantry's", len(l.Items))
		})
	})
}

// nothingLeft checks what an uninstall must leave: no runner registered on GitHub, no
// Gantry CRD, no object of Gantry's (runner pods, Secrets, NetworkPolicies) left, and the namespaces gone (or
// kept) as the docs say.
func nothingLeft(goneNamespaces ...string) docStep {
	return action("check the uninstall left nothing behind", func(t *testing.T, w *docWorld) {
		if rs := w.sim.Runners(); len(rs) != 0 {
			t.Errorf("%d runners still registered on GitHub after the uninstall: %+v", len(rs), rs)
		}
		waitFor(t, "no Gantry CRD, no runner pod or Secret, and namespaces "+strings.Join(goneNamespaces, ", ")+" gone", time.Minute, func(ctx context.Context) (bool, string) {
			var crds metav1.PartialObjectMetadataList
			crds.SetGroupVersionKind(crdListGVK)
			if err := w.cluster.c.List(ctx, &crds); err != nil {
				return false, err.Error()
			}
			var left []string
			for _, c := range crds.Items {
				if strings.HasSuffix(c.Name, ".gantry.dev") {
					left = append(left, "CRD "+c.Name+" (finalizers "+strings.Join(c.Finalizers, ",")+")")
				}
			}
			for _, gvk := range []schema.GroupVersionKind{corev1Pod.GroupVersion().WithKind("PodList"), corev1Pod.GroupVersion().WithKind("SecretList"),
				networkingv1.SchemeGroupVersion.WithKind("NetworkPolicyList")} {
				var l metav1.PartialObjectMetadataList
				l.SetGroupVersionKind(gvk)
				if err := w.cluster.c.List(ctx, &l, client.MatchingLabels{"app.kubernetes.io/managed-by": "gantry"}); err != nil {
					return false, err.Error()
				}
				for _, o := range l.Items {
					left = append(left, gvk.Kind+" "+o.Namespace+"/"+o.Name)
				}
			}
			for _, ns := range goneNamespaces {
				var n metav1.PartialObjectMetadata
				n.SetGroupVersionKind(corev1Pod.GroupVersion().WithKind("Namespace"))
				if err := w.cluster.c.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil {
					left = append(left, "namespace "+ns)
				}
			}
			return len(left) == 0, strings.Join(left, "; ")
		})
	})
}

// docTools are the binaries the docs tests run, built by TestMain.
var docTools struct{ kubectl, gantry string }

// buildDocTools builds kubectl (hack/helm/kubectl, from k8s.io/kubectl at the version
// the pinned helm uses) and gantry (./cmd/gantry, with -race when the tests have it)
// into dir.
func buildDocTools(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	build := func(wd, out, pkg string, extra ...string) error {
		args := append([]string{"build", "-o", out}, extra...)
		cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
		cmd.Dir = wd
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s (the docs tests need it and do not skip): %w\n%s", pkg, err, b)
		}
		return nil
	}
	docTools.kubectl = filepath.Join(dir, "kubectl")
	if err := build(filepath.Join(root, "hack", "helm"), docTools.kubectl, "./kubectl"); err != nil {
		return err
	}
	docTools.gantry = filepath.Join(dir, "gantry")
	var race []string
	if raceEnabled {
		race = []string{"-race"}
	}
	return build(root, docTools.gantry, "./cmd/gantry", race...)
}

// quickstartPermissions maps the quickstart's permission table ("Organization →
// Self-hosted runners", "Read and write") to GitHub's names and levels.
var quickstartPermissionNames = map[string]string{
	"Organization → Self-hosted runners": simgithub.PermOrgSelfHostedRunners,
	"Repository → Administration":        simgithub.PermAdministration,
	"Repository → Actions":               simgithub.PermActions,
	"Repository → Metadata":              simgithub.PermMetadata,
}

// quickstartInstallation installs the App with exactly the permissions the
// quickstart's table asks for: the simulator refuses any call they do not allow, and
// TestDocs fails on a refused call, so the table is tested.
func quickstartInstallation(t *testing.T, appID int64) simgithub.InstallationSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\s*\|\s*((?:Organization|Repository) → [^|]+?)\s*\|\s*(Read and write|Read)\s*\|`)
	perms := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		name, ok := quickstartPermissionNames[m[1]]
		if !ok {
			t.Fatalf("docs/quickstart.md asks for permission %q, which the docs tests do not know (quickstartPermissionNames)", m[1])
		}
		perms[name] = map[string]string{"Read and write": "write", "Read": "read"}[m[2]]
	}
	if len(perms) == 0 {
		t.Fatal("docs/quickstart.md has no permission table the docs tests can read")
	}
	t.Logf("the App is installed with the quickstart's permissions: %v", perms)
	return simgithub.InstallationSpec{AppID: appID, Org: docOrg, Permissions: perms}
}

// noCallRefused fails the test for each GitHub call the simulator refused with 401 or
// 403: a permission, a credential or a scope the docs got wrong.
func (w *docWorld) noCallRefused(t *testing.T) {
	t.Helper()
	for route, c := range w.sim.CallCounts() {
		for _, code := range []int{401, 403} {
			if n := c.ByStatus[code]; n > 0 {
				t.Errorf("GitHub refused %s %d times with %d: the documented credentials or permissions do not allow it", route, n, code)
			}
		}
	}
}
