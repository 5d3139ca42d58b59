package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// More actions of the docs scenarios: checks of what a documented block promises.

// doctorAsDocumentedUser runs `gantry doctor` as the user doctor.md's blocks bound its
// ClusterRole to: with exactly those rights, no check may be cut short by a refusal.
func doctorAsDocumentedUser() docStep {
	return action("run gantry doctor as "+docUser+", who has doctor.md's ClusterRole only", func(t *testing.T, w *docWorld) {
		jane, err := w.cluster.te.AddUser(envtest.User{Name: docUser}, nil)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := jane.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(w.cluster.dir, "kubeconfig-"+docUser)
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		type report struct {
			Install []struct{ Name, Status, Message string } `json:"install"`
			Pools   []struct {
				Pool   string `json:"pool"`
				Checks []struct{ Name, Status, Message string }
			} `json:"pools"`
		}
		run := func(who, env string) (report, map[string]string) {
			out, stderr, err := w.shell(t, env+"gantry doctor -o json")
			if err != nil {
				t.Fatalf("gantry doctor as %s: %v\nstdout:\n%s\nstderr:\n%s", who, err, out, stderr)
			}
			var rep report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Pools) == 0 {
				t.Fatalf("gantry doctor -o json as %s printed no pools: %v\n%s", who, err, out)
			}
			statuses := map[string]string{}
			for _, p := range rep.Pools {
				for _, c := range p.Checks {
					statuses[p.Pool+" "+c.Name] = c.Status
				}
			}
			for _, c := range rep.Install {
				statuses["install "+c.Name] = c.Status
			}
			return rep, statuses
		}
		_, admin := run("the cluster's admin", "")
		rep, user := run(docUser, "KUBECONFIG="+path+" ")
		if diff := cmp.Diff(admin, user); diff != "" {
			t.Errorf("with doctor.md's ClusterRole only, doctor's checks end otherwise than an admin's (-admin +%s):\n%s", docUser, diff)
		}
		for _, c := range rep.Install {
			if strings.Contains(c.Message, "forbidden") || strings.Contains(c.Message, "may not") {
				t.Errorf("as %s, check %s was refused a read: %s", docUser, c.Name, c.Message)
			}
		}
	})
}

// hookRoleBindingIn waits for the RoleBinding of the gantry-container-hook ClusterRole
// a Kubernetes-mode pool with isolation Pool gets in its containerMode namespace.
func hookRoleBindingIn(ns string) docStep {
	return action("wait for the gantry-container-hook RoleBinding in "+ns, func(t *testing.T, w *docWorld) {
		waitFor(t, "a RoleBinding of ClusterRole gantry-container-hook in "+ns, time.Minute, func(ctx context.Context) (bool, string) {
			var l rbacv1.RoleBindingList
			if err := w.cluster.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, b := range l.Items {
				if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "gantry-container-hook" {
					return true, ""
				}
				seen = append(seen, b.Name)
			}
			return false, fmt.Sprintf("RoleBindings %v", seen)
		})
	})
}

// networkPolicyIn checks a NetworkPolicy exists.
func networkPolicyIn(ns, name string) docStep {
	return action("check NetworkPolicy "+ns+"/"+name+" exists", func(t *testing.T, w *docWorld) {
		var p networkingv1.NetworkPolicy
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
	})
}

// scaleSetStatusAsShown compares the status.scaleSet a block printed (its last line, a
// JSON object) with the console block that follows that block in its doc: they must
// have the same fields, at every level (the values are the example's own).
func scaleSetStatusAsShown(ref string) docStep {
	st := action("compare the status.scaleSet "+ref+" printed with the example after it", func(t *testing.T, w *docWorld) {
		b := w.blocks[ref]
		shown := consoleAfter(t, b)
		lines := strings.Split(strings.TrimSpace(w.out[ref]), "\n")
		printed := lines[len(lines)-1]
		want, got := jsonFields(t, shown), jsonFields(t, printed)
		if !slices.Equal(want, got) {
			t.Errorf("%s: the example after the block shows the fields %v; the block printed %v (%s)", b.where(), want, got, printed)
		}
	})
	st.runs = []string{ref}
	return st
}

// consoleAfter returns the body of the first console block after block b in its doc.
func consoleAfter(t *testing.T, b docBlock) string {
	t.Helper()
	_, blocks := readDoc(t, b.file)
	for _, o := range blocks {
		if o.line > b.line && o.lang == "console" {
			return strings.TrimSpace(o.body)
		}
	}
	t.Fatalf("%s: no console block follows", b.where())
	return ""
}

// jsonFields lists the paths of every field of a JSON object ("a", "a.b").
func jsonFields(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%q is not a JSON object: %v", s, err)
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out = append(out, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	sort.Strings(out)
	return out
}

// poolStoredAsWritten checks that a RunnerPool applied from a file of the checkout
// holds that file's github.url, as written.
func poolStoredAsWritten(ns, name, file string) docStep {
	return action("check RunnerPool "+ns+"/"+name+" is "+file+" as written", func(t *testing.T, w *docWorld) {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		var written v1alpha1.RunnerPool
		if err := yaml.Unmarshal(b, &written); err != nil {
			t.Fatal(err)
		}
		var p v1alpha1.RunnerPool
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.GitHub.URL != written.Spec.GitHub.URL {
			t.Errorf("pool %s/%s has github.url %q, want %s's %q", ns, name, p.Spec.GitHub.URL, file, written.Spec.GitHub.URL)
		}
	})
}

// fileHas checks what a documented command left in a file of the working directory.
func fileHas(rel string, want ...string) docStep {
	return action("check "+rel+" holds "+strings.Join(want, ", "), func(t *testing.T, w *docWorld) {
		b, err := os.ReadFile(filepath.Join(w.dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range want {
			if !strings.Contains(string(b), s) {
				t.Errorf("%s (working copy) does not hold %q:\n%s", rel, s, b)
			}
		}
	})
}

// credentialsSecretLeftHeld is what troubleshooting.md's "A credentials Secret stays
// Terminating" starts from: Gantry uninstalled while a pool still names its credentials
// Secret ns/name, then the Secret deleted. The finalizer holding it is the one the
// controller put there, not the test's.
func credentialsSecretLeftHeld(ns, name string) docStep {
	return action("uninstall Gantry while a pool names Secret "+ns+"/"+name+", then delete the Secret: it stays Terminating", func(t *testing.T, w *docWorld) {
		ctx := context.Background()
		var s corev1.Secret
		if err := w.cluster.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(s.Finalizers, v1alpha1.CredentialsFinalizer) {
			t.Fatalf("Secret %s/%s has finalizers %q, want %s put by the controller while a pool names it", ns, name, s.Finalizers, v1alpha1.CredentialsFinalizer)
		}
		for _, cmd := range []string{"helm uninstall gantry -n gantry-system", "kubectl -n " + ns + " delete secret " + name + " --wait=false"} {
			if _, stderr, err := w.shell(t, cmd); err != nil {
				t.Fatalf("%s: %v: %s", cmd, err, stderr)
			}
			if w.ctrl != nil {
				w.ctrl.stop() // the Deployment is gone: so is its pod
			}
		}
		if err := w.cluster.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil || s.DeletionTimestamp == nil {
			t.Fatalf("Secret %s/%s should be Terminating, held by its finalizer: %v", ns, name, err)
		}
	})
}

// secretGone waits for Secret ns/name to be deleted.
func secretGone(ns, name string) docStep {
	return action("check Secret "+ns+"/"+name+" is gone", func(t *testing.T, w *docWorld) {
		waitFor(t, "Secret "+ns+"/"+name+" deleted", 30*time.Second, func(ctx context.Context) (bool, string) {
			var s corev1.Secret
			err := w.cluster.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return false, fmt.Sprintf("finalizers %q", s.Finalizers)
		})
	})
}
