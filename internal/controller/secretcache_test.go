package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestSecretCacheReadsOncePerTTLAndKeepsTheLastGoodReadThroughErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	key := types.NamespacedName{Namespace: "ci", Name: "hook"}
	var reads int
	var failWith error
	kube := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads++
			if failWith != nil {
				return failWith
			}
			return c.Get(ctx, k, obj, opts...)
		},
	}).Build()
	c := &SecretCache{Reader: kube, Clock: clk, TTL: 30 * time.Second}
	ctx := context.Background()
	get := func() (string, bool, error) {
		data, found, err := c.Get(ctx, key)
		return string(data["secret"]), found, err
	}

	// Missing, and remembered as missing for the TTL.
	if v, found, err := get(); err != nil || found || v != "" {
		t.Fatalf("missing Secret: got %q, found %v, err %v", v, found, err)
	}
	if err := kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"secret": []byte("one")}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(29 * time.Second)
	if _, found, _ := get(); found || reads != 1 {
		t.Fatalf("within the TTL: found %v after %d reads, want the remembered miss after 1", found, reads)
	}

	// Read again once the TTL is over.
	clk.Step(time.Second)
	if v, found, err := get(); err != nil || !found || v != "one" || reads != 2 {
		t.Fatalf("after the TTL: got %q, found %v, err %v, %d reads; want \"one\" on the 2nd read", v, found, err, reads)
	}

	// A failed read returns the error with the last good read, and is not remembered.
	failWith = errors.New("connection refused")
	clk.Step(30 * time.Second)
	v, found, err := get()
	if err == nil || !found || v != "one" {
		t.Fatalf("failed read: got %q, found %v, err %v; want the error with the last good \"one\"", v, found, err)
	}
	failWith = nil
	if err := kube.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"secret": []byte("two")}}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := get(); err != nil || v != "two" || reads != 4 {
		t.Fatalf("after a failed read: got %q, err %v, %d reads; want \"two\" read again at once (4 reads)", v, err, reads)
	}

	// A failed first read has nothing to fall back on.
	failWith = errors.New("forbidden")
	other := &SecretCache{Reader: kube, Clock: clk, TTL: 30 * time.Second}
	if data, found, err := other.Get(ctx, key); err == nil || found || data != nil {
		t.Fatalf("failed first read: got %v, found %v, err %v", data, found, err)
	}
}

// Callers that find the Secret due at once share one read.
func TestSecretCacheSharesAReadBetweenConcurrentCallers(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "creds"}, Data: map[string][]byte{"github_token": []byte("t")}}
	var reads atomic.Int64
	release := make(chan struct{})
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			<-release
			return c.Get(ctx, k, obj, opts...)
		},
	}).Build()
	c := &SecretCache{Reader: kube, Clock: clocktesting.NewFakeClock(time.Now()), TTL: time.Minute}
	var wg sync.WaitGroup
	var found atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := c.Get(context.Background(), client.ObjectKeyFromObject(secret)); ok && err == nil {
				found.Add(1)
			}
		}()
	}
	for reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the other callers join the read under way
	close(release)
	wg.Wait()
	if reads.Load() != 1 || found.Load() != 20 {
		t.Errorf("20 concurrent callers: %d reads, %d found the Secret; want 1 read, 20 found", reads.Load(), found.Load())
	}
}
