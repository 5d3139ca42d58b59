package runnerpool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrynodes "github.com/gantry-dev/gantry/internal/controller/nodes"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// node builds a Ready node of an OS and architecture; mutate changes it further.
func node(name, os, arch string, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.NodeLabelOS: os, v1alpha1.NodeLabelArch: arch}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func labeled(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

func tainted(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "true", Effect: effect})
	}
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func TestChoosePlatform(t *testing.T) {
	archIn := func(values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: v1alpha1.NodeLabelArch, Operator: corev1.NodeSelectorOpIn, Values: values}}}},
		}}}
	}
	tests := []struct {
		name   string
		pod    func(*corev1.PodSpec)
		nodes  []corev1.Node
		want   v1alpha1.PlatformStatus
		wantIn string // in the message
	}{
		{
			name: "the template pins both: the nodes are not asked",
			pod: func(p *corev1.PodSpec) {
				p.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "arm64"}
			},
			nodes: []corev1.Node{node("a", "linux", "amd64")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromTemplate}, wantIn: "the template pins linux/arm64",
		},
		{
			name:  "an arm64-only cluster: arm64",
			nodes: []corev1.Node{node("a", "linux", "arm64"), node("b", "linux", "arm64")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes}, wantIn: "the 2 Ready node(s) the pool's pods can be scheduled on are linux/arm64",
		},
		{
			name:  "an amd64-only cluster: amd64",
			nodes: []corev1.Node{node("a", "linux", "amd64")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "amd64", Source: v1alpha1.PlatformFromNodes},
		},
		{
			name:   "a mixed cluster: amd64 preferred, however few, and the message says how to choose",
			nodes:  []corev1.Node{node("a", "linux", "amd64"), node("b", "linux", "arm64"), node("c", "linux", "arm64")},
			want:   v1alpha1.PlatformStatus{OS: "linux", Arch: "amd64", Source: v1alpha1.PlatformFromNodes},
			wantIn: "several architectures (amd64: 1, arm64: 2): amd64 chosen; set template.spec.nodeSelector kubernetes.io/arch to choose",
		},
		{
			name:  "mixed without amd64: the most common",
			nodes: []corev1.Node{node("a", "linux", "arm"), node("b", "linux", "arm64"), node("c", "linux", "arm64")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes}, wantIn: "arm: 1, arm64: 2",
		},
		{
			name: "no node: Default linux/amd64, read again later",
			want: v1alpha1.PlatformStatus{OS: "linux", Arch: "amd64", Source: v1alpha1.PlatformDefault}, wantIn: "no Ready node",
		},
		{
			name: "nodes the pods cannot go to do not count: NotReady, cordoned, tainted, another pool's, an unknown architecture",
			pod:  func(p *corev1.PodSpec) { p.NodeSelector = map[string]string{"pool": "ci"} },
			nodes: []corev1.Node{
				node("ready", "linux", "arm64", labeled("pool", "ci")),
				node("notready", "linux", "amd64", labeled("pool", "ci"), notReady),
				node("cordoned", "linux", "amd64", labeled("pool", "ci"), cordoned),
				node("tainted", "linux", "amd64", labeled("pool", "ci"), tainted("dedicated", corev1.TaintEffectNoSchedule)),
				node("other", "linux", "amd64", labeled("pool", "web")),
				node("s390x", "linux", "s390x", labeled("pool", "ci")),
			},
			want: v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes}, wantIn: "the 1 Ready node(s)",
		},
		{
			name: "a taint the template tolerates, and a PreferNoSchedule one, do not keep a node out",
			pod: func(p *corev1.PodSpec) {
				p.Tolerations = []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists}}
			},
			nodes: []corev1.Node{
				node("a", "linux", "arm64", tainted("ci", corev1.TaintEffectNoSchedule)),
				node("b", "linux", "arm64", tainted("spot", corev1.TaintEffectPreferNoSchedule)),
				node("c", "linux", "amd64", tainted("gpu", corev1.TaintEffectNoExecute)),
			},
			want: v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes}, wantIn: "the 2 Ready node(s)",
		},
		{
			name:  "a required node affinity allowing amd64 and arm64, on arm64 and s390x nodes: arm64",
			pod:   func(p *corev1.PodSpec) { p.Affinity = archIn("amd64", "arm64") },
			nodes: []corev1.Node{node("a", "linux", "arm64"), node("b", "linux", "s390x")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes},
		},
		{
			name:  "the template pins the architecture only: the OS is read from the nodes of that architecture",
			pod:   func(p *corev1.PodSpec) { p.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "amd64"} },
			nodes: []corev1.Node{node("a", "windows", "amd64"), node("b", "linux", "arm64")},
			want:  v1alpha1.PlatformStatus{OS: "windows", Arch: "amd64", Source: v1alpha1.PlatformFromNodes},
		},
		{
			name:  "the template pins arm64, no such node: Default keeps arm64",
			pod:   func(p *corev1.PodSpec) { p.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "arm64"} },
			nodes: []corev1.Node{node("a", "linux", "amd64")},
			want:  v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformDefault}, wantIn: "linux/arm64 is assumed",
		},
		{
			name:  "spec.os.name windows: the architecture of the windows nodes",
			pod:   func(p *corev1.PodSpec) { p.OS = &corev1.PodOS{Name: corev1.Windows} },
			nodes: []corev1.Node{node("a", "windows", "amd64"), node("b", "linux", "arm64")},
			want:  v1alpha1.PlatformStatus{OS: "windows", Arch: "amd64", Source: v1alpha1.PlatformFromNodes},
		},
		{
			name:   "linux and windows nodes, neither pinned: linux, and the message says so",
			nodes:  []corev1.Node{node("a", "windows", "amd64"), node("b", "windows", "amd64"), node("c", "linux", "arm64")},
			want:   v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes},
			wantIn: "several operating systems (linux: 1, windows: 2): linux chosen",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool("ci", "p").Obj()
			if tt.pod != nil {
				tt.pod(&pool.Spec.Template.Spec)
			}
			got := choosePlatform(pool, tt.nodes)
			msg := got.Message
			got.Message = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("choosePlatform (-want +got):\n%s", diff)
			}
			if !strings.Contains(msg, tt.wantIn) {
				t.Errorf("message %q does not say %q", msg, tt.wantIn)
			}
		})
	}
}

// A pool's platform is logged once per change: the passes before its first status write
// choose it again from a stored status without one, and say nothing more.
func TestPlatformAnnouncedOnce(t *testing.T) {
	var p platformReads
	a, b := types.NamespacedName{Namespace: "ci", Name: "a"}, types.NamespacedName{Namespace: "ci", Name: "b"}
	for _, s := range []struct {
		key      types.NamespacedName
		platform string
		forget   bool
		want     bool
	}{
		{key: a, platform: "linux/amd64", want: true},
		{key: a, platform: "linux/amd64", want: false},
		{key: b, platform: "linux/amd64", want: true},
		{key: a, platform: "linux/arm64", want: true},
		{key: a, platform: "linux/amd64", want: true},
		{key: a, forget: true},
		{key: a, platform: "linux/amd64", want: true},
	} {
		if s.forget {
			p.forget(s.key)
			continue
		}
		if got := p.announce(s.key, s.platform); got != s.want {
			t.Errorf("announce(%s, %s) = %v, want %v", s.key.Name, s.platform, got, s.want)
		}
	}
}

// The platform phase reads the nodes once per generation of the spec, keeps what it read
// as nodes come and go, reads them again every platformRecheck while it has seen none,
// and holds runner creation in the pass that changes the platform.
func TestPlatformPhase(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC))
	lists := 0
	var listErr error
	nodes := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			if listErr != nil {
				return listErr
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	r := &Reconciler{Nodes: &gantrynodes.View{Reader: nodes}, Clock: clk}
	pool := testutil.RunnerPool("ci", "p").Obj()
	pool.Generation = 1
	type step struct {
		name        string
		do          func()
		wantArch    string
		wantSource  v1alpha1.PlatformSource
		wantLists   int
		wantChanged bool
		wantRequeue time.Duration
	}
	addNode := func(n corev1.Node) func() {
		return func() {
			if err := nodes.Create(ctx, &n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []step{
		{name: "no node yet: Default amd64, creation held once", do: func() {}, wantArch: "amd64", wantSource: v1alpha1.PlatformDefault,
			wantLists: 1, wantChanged: true, wantRequeue: platformRecheck},
		{name: "again at once: not read again", do: func() {}, wantArch: "amd64", wantSource: v1alpha1.PlatformDefault,
			wantLists: 1, wantRequeue: platformRecheck},
		{name: "an arm64 node joins, a minute later: read again, arm64", do: func() {
			addNode(node("arm", "linux", "arm64"))()
			clk.Step(platformRecheck)
		}, wantArch: "arm64", wantSource: v1alpha1.PlatformFromNodes, wantLists: 2, wantChanged: true},
		{name: "an amd64 node joins: kept, the nodes are not read", do: addNode(node("amd", "linux", "amd64")),
			wantArch: "arm64", wantSource: v1alpha1.PlatformFromNodes, wantLists: 2},
		{name: "the spec changes: read again, mixed now, amd64", do: func() { pool.Generation = 2 },
			wantArch: "amd64", wantSource: v1alpha1.PlatformFromNodes, wantLists: 3, wantChanged: true},
		{name: "the spec changes, the nodes cannot be listed: kept", do: func() { pool.Generation, listErr = 3, errors.New("forbidden") },
			wantArch: "amd64", wantSource: v1alpha1.PlatformFromNodes, wantLists: 4},
		{name: "and is not listed again for that generation", do: func() {},
			wantArch: "amd64", wantSource: v1alpha1.PlatformFromNodes, wantLists: 4},
		{name: "the template pins arm64: taken as it is, the nodes not read", do: func() {
			pool.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "arm64"}
			pool.Generation = 4
		}, wantArch: "arm64", wantSource: v1alpha1.PlatformFromTemplate, wantLists: 4, wantChanged: true},
	} {
		s.do()
		st := &state{pool: pool}
		res, err := r.platform(ctx, st)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := pool.Status.Platform
		if got == nil || got.Arch != s.wantArch || got.Source != s.wantSource || got.ObservedGeneration != pool.Generation {
			t.Errorf("%s: status.platform %+v, want arch %s from %s at generation %d", s.name, got, s.wantArch, s.wantSource, pool.Generation)
		}
		if lists != s.wantLists || st.platformChanged != s.wantChanged || res.RequeueAfter != s.wantRequeue {
			t.Errorf("%s: lists %d, creation held %v, requeue %v; want %d, %v, %v", s.name, lists, st.platformChanged, res.RequeueAfter,
				s.wantLists, s.wantChanged, s.wantRequeue)
		}
	}
}
