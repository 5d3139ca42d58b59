package install

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// docController is the controller of an installed Deployment, run the way its pod
// would run it: the gantry binary built from this checkout, with the container's
// arguments and environment as the API server stores them, as the pod's
// ServiceAccount. What a pod has and a test process has not is rewritten, and logged:
// the bind addresses (":8080") become free ports on 127.0.0.1, POD_IP is 127.0.0.1,
// SSL_CERT_FILE trusts the GitHub simulator's CA (unless the Deployment passes
// --github-ca-bundle, which must then do it). It stops when its Deployment is
// deleted, as the pod would.
type docController struct {
	t       *testing.T
	deploy  types.NamespacedName
	logPath string
	probe   string // 127.0.0.1:PORT of /readyz
	webhook string // 127.0.0.1:PORT of /webhook

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// runDeployment starts the controller of Deployment ns/name and waits until it is
// ready.
func runDeployment(t *testing.T, w *docWorld, ns, name string) *docController {
	t.Helper()
	var d appsv1.Deployment
	if err := w.cluster.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatalf("the docs installed no Deployment %s/%s: %v", ns, name, err)
	}
	var c *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "controller" {
			c = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("Deployment %s/%s has no container named controller", ns, name)
	}
	if len(c.Command) > 0 {
		t.Fatalf("Deployment %s/%s overrides the image's entrypoint (%q); the test runs gantry with the args only", ns, name, c.Command)
	}
	dc := &docController{t: t, deploy: types.NamespacedName{Namespace: ns, Name: name},
		logPath: filepath.Join(w.dir, fmt.Sprintf("controller-%s-%d.log", name, time.Now().UnixNano()))}
	args := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		flag, _, hasValue := strings.Cut(a, "=")
		switch flag {
		case "--metrics-bind-address", "--health-probe-bind-address", "--webhook-bind-address", "--eviction-webhook-bind-address":
			if !hasValue {
				t.Fatalf("the test rewrites %s=VALUE only; the Deployment has %q", flag, a)
			}
			addr := freeLoopback(t)
			switch flag {
			case "--health-probe-bind-address":
				dc.probe = addr
			case "--webhook-bind-address":
				dc.webhook = addr
			}
			t.Logf("controller: %s → %s=%s (a free port on loopback instead of the pod's)", a, flag, addr)
			a = flag + "=" + addr
		}
		if hasValue {
			if local, ok := mountedVolumePath(t, w, &d, c, a[len(flag)+1:]); ok {
				t.Logf("controller: %s → %s=%s (the volume's content, as the kubelet mounts it)", a, flag, local)
				a = flag + "=" + local
			}
		}
		args = append(args, a)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--leader-election-namespace") }) {
		// In the pod, controller-runtime reads the namespace from the ServiceAccount's
		// mounted token directory, which a test process has not.
		args = append(args, "--leader-election-namespace="+ns)
		t.Logf("controller: --leader-election-namespace=%s added (in the pod it comes from the ServiceAccount's mounted namespace file)", ns)
	}
	if dc.probe == "" || dc.webhook == "" {
		t.Fatalf("the Deployment's args %q set no --health-probe-bind-address or --webhook-bind-address", c.Args)
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	environ := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + w.home,
		"KUBECONFIG=" + w.cluster.serviceAccountKubeconfig(t, ns, sa),
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--github-ca-bundle=") }) {
		// The installed CA bundle alone must make the simulator trusted.
		t.Logf("controller: no SSL_CERT_FILE: the Deployment passes --github-ca-bundle")
	} else {
		environ = append(environ, "SSL_CERT_FILE="+w.simCA)
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			environ = append(environ, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			environ = append(environ, e.Name+"=127.0.0.1")
			t.Logf("controller: env %s from status.podIP → 127.0.0.1", e.Name)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			environ = append(environ, e.Name+"="+d.Name+"-0")
			t.Logf("controller: env %s from metadata.name → %s-0", e.Name, d.Name)
		default:
			t.Fatalf("controller env %s comes from a source the test cannot play: %+v", e.Name, e.ValueFrom)
		}
	}
	t.Logf("controller: %s %s as ServiceAccount %s/%s", w.gantry, strings.Join(args, " "), ns, sa)
	start := func() {
		logf, err := os.OpenFile(dc.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		dc.cmd = exec.Command(w.gantry, args...) //nolint:noctx // stopped with its process group
		dc.cmd.Env = environ
		dc.cmd.Stdout, dc.cmd.Stderr = logf, logf
		dc.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := dc.cmd.Start(); err != nil {
			t.Fatalf("starting the controller: %v", err)
		}
		exited, cmd := make(chan struct{}), dc.cmd
		dc.exited = exited
		go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	}
	start()
	t.Cleanup(dc.stop)
	// The kubelet restarts a container that exits (restartPolicy Always): a controller
	// started before the API server serves the CRDs just applied exits, and runs again.
	restarts := 0
	var restartAt time.Time
	waitFor(t, "the controller ready on /readyz", 2*time.Minute, func(ctx context.Context) (bool, string) {
		select {
		case <-dc.exited:
			if restartAt.IsZero() {
				restarts++
				if restarts > 5 {
					t.Fatalf("the controller exited %d times before it was ready; its log:\n%s", restarts, redactLog(tail(dc.logPath, 30)))
				}
				restartAt = time.Now().Add(time.Second)
				t.Logf("controller: exited before it was ready (%s); restarted as the kubelet would", firstLine(tail(dc.logPath, 1)))
			}
			if time.Now().Before(restartAt) {
				return false, "restarting"
			}
			restartAt = time.Time{}
			start()
			return false, "restarted"
		default:
		}
		code := httpGet(ctx, "http://"+dc.probe+"/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz answered %d", code)
	})
	go dc.dieWithDeployment(w)
	return dc
}

// mountedVolumePath plays the kubelet for a flag's path inside a ConfigMap or Secret
// volume of the controller (the runner NetworkPolicy, a CA bundle, the eviction
// webhook's certificate directory): it writes the installed object's keys into the
// test's directory and returns the path there — a file for a key, a directory for the
// mount itself.
func mountedVolumePath(t *testing.T, w *docWorld, d *appsv1.Deployment, c *corev1.Container, path string) (string, bool) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		mount := strings.TrimSuffix(m.MountPath, "/")
		if path != mount && !strings.HasPrefix(path, mount+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			data := map[string][]byte{}
			key := types.NamespacedName{Namespace: d.Namespace}
			switch {
			case v.ConfigMap != nil:
				var cm corev1.ConfigMap
				key.Name = v.ConfigMap.Name
				if err := w.cluster.c.Get(context.Background(), key, &cm); err != nil {
					t.Fatalf("ConfigMap %s of volume %s: %v", key.Name, v.Name, err)
				}
				for k, val := range cm.Data {
					data[k] = []byte(val)
				}
			case v.Secret != nil:
				var s corev1.Secret
				key.Name = v.Secret.SecretName
				if err := w.cluster.c.Get(context.Background(), key, &s); err != nil {
					t.Fatalf("Secret %s of volume %s: %v", key.Name, v.Name, err)
				}
				data = s.Data
			default:
				continue
			}
			dir := filepath.Join(w.dir, "mounts", d.Name, v.Name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for k, val := range data {
				if err := os.WriteFile(filepath.Join(dir, k), val, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return filepath.Join(dir, strings.TrimPrefix(strings.TrimPrefix(path, mount), "/")), true
		}
	}
	return "", false
}

// dieWithDeployment stops the process once its Deployment is gone, as its pod would.
func (dc *docController) dieWithDeployment(w *docWorld) {
	for {
		select {
		case <-dc.exited:
			return
		case <-time.After(250 * time.Millisecond):
		}
		var d appsv1.Deployment
		err := w.cluster.c.Get(context.Background(), dc.deploy, &d)
		if apierrors.IsNotFound(err) || err == nil && d.DeletionTimestamp != nil {
			dc.stop()
			return
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (dc *docController) stop() {
	dc.mu.Lock()
	if dc.stopped {
		dc.mu.Unlock()
		<-dc.exited
		return
	}
	dc.stopped = true
	dc.mu.Unlock()
	_ = syscall.Kill(-dc.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-dc.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-dc.cmd.Process.Pid, syscall.SIGKILL)
		<-dc.exited
	}
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(ctx context.Context, url string) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// redactLog keeps only lines that name no credential, for a failure message. The
// controller never logs secrets; this guards the test's own output anyway.
func redactLog(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "private key") || strings.Contains(low, "jitconfig\":\"") || strings.Contains(low, "token\":\"") {
			l = "[line withheld: it may hold a credential]"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
