package github

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestProviderCachesOneClientPerCredentials(t *testing.T) {
	var built []string
	p := NewProvider(ProviderOptions{
		Options: Options{Clock: newClock()},
		NewClient: func(c Credentials, o Options) (Client, error) {
			built = append(built, o.Name)
			return NewClient(c, o)
		},
	})
	secret := func(rv, token string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gh", ResourceVersion: rv, Labels: labels},
			Data:       map[string][]byte{KeyToken: []byte(token)},
		}
	}

	c1, err := p.ForSecret(secret("1", "ghp_one11111", nil))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := p.ForSecret(secret("2", "ghp_one11111", map[string]string{"touched": "yes"}))
	if err != nil {
		t.Fatal(err)
	}
	if c1 != c2 {
		t.Errorf("an update that kept the credentials built a new client")
	}
	c3, err := p.ForSecret(secret("3", "ghp_two22222", nil))
	if err != nil {
		t.Fatal(err)
	}
	if c3 == c1 {
		t.Errorf("a rotated token reused the old client")
	}
	other, err := p.Get(types.NamespacedName{Namespace: "ns2", Name: "gh"}, map[string][]byte{KeyToken: []byte("ghp_two22222")})
	if err != nil {
		t.Fatal(err)
	}
	if other == c3 {
		t.Errorf("two Secrets share a client")
	}
	p.Forget(types.NamespacedName{Namespace: "ns", Name: "gh"})
	c4, err := p.ForSecret(secret("4", "ghp_two22222", nil))
	if err != nil {
		t.Fatal(err)
	}
	if c4 == c3 {
		t.Errorf("Forget kept the client")
	}
	if diff := cmp.Diff([]string{"ns/gh", "ns/gh", "ns2/gh", "ns/gh"}, built); diff != "" {
		t.Errorf("clients built (-want +got):\n%s", diff)
	}

	_, err = p.ForSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "broken"}, Data: map[string][]byte{KeyAppID: []byte("1")}})
	if err == nil || !strings.Contains(err.Error(), "secret ns/broken") || !strings.Contains(err.Error(), KeyAppPrivateKey) {
		t.Errorf("broken Secret error = %v, want it to name the Secret and the missing key", err)
	}
}
