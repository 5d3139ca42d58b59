package run

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/selfsigned"
)

// evictionWebhook is where the controller serves its eviction webhook and the directory
// of its certificate; zero: it serves none.
type evictionWebhook struct {
	addr, certDir string
}

// args are the controller's flags for it.
func (e evictionWebhook) args() []string {
	if e.addr == "" {
		return nil
	}
	return []string{"--eviction-webhook-bind-address=" + e.addr, "--eviction-webhook-cert-dir=" + e.certDir}
}

// servesEvictions reports whether the gantry binary bin, run with the controller's
// extra environment env (Options.GantryEnv: a test binary runs as gantry only with it),
// has the eviction webhook: a build from before it (--controller-binary) runs without,
// as it shipped.
func servesEvictions(ctx context.Context, bin string, env []string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "controller", "--help")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	return err == nil && strings.Contains(string(out), "--eviction-webhook-bind-address")
}

// setupEvictionWebhook plays the chart's eviction webhook, served on port: a certificate of a CA of the
// run's own for 127.0.0.1, written into certDir, and the ValidatingWebhookConfiguration that
// sends the evictions of the watched namespaces (all when none is named) to it, as the
// chart renders them with and without watchNamespaces.
func setupEvictionWebhook(ctx context.Context, c client.Client, port int, certDir string, namespaces []string) (evictionWebhook, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cert, err := selfsigned.New([]string{"127.0.0.1"}, 7*24*time.Hour)
	if err != nil {
		return evictionWebhook{}, err
	}
	if err := cert.WriteDir(certDir); err != nil {
		return evictionWebhook{}, fmt.Errorf("writing the eviction webhook's certificate: %w", err)
	}
	var selector *metav1.LabelSelector
	if len(namespaces) > 0 {
		selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces,
		}}}
	}
	url := "https://" + addr + runner.EvictionWebhookPath
	vwc := runner.EvictionWebhookConfiguration("gantry-eviction",
		admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: cert.CAPEM}, selector, 5)
	if err := c.Create(ctx, vwc); err != nil {
		return evictionWebhook{}, fmt.Errorf("registering the eviction webhook: %w", err)
	}
	return evictionWebhook{addr: addr, certDir: certDir}, nil
}
