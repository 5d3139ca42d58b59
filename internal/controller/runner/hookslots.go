package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// This file is the claim table of the container hook slots (isolation Runner): which
// runner holds which slot, kept by the process that reconciles runners and nothing else.
//
// Why a claim needs no write: only the leader reconciles Runners and RunnerPools, and a
// replica that loses the lead exits — leader election's RenewDeadline (6 s) is shorter
// than its LeaseDuration (8 s), so a leader stops before another can take over. That is
// the assumption controller.RunnerBirths already rests on for registering runners. So
// two claims of one slot meet under this table's lock, not at the API server.
//
// What makes a claim last beyond this process is the runner pod, made right after the
// choice: it names the slot's ServiceAccount, and its hook's namespace in its
// environment (hookOfPod). The Runner's status records the slot too
// (status.containerHook, with its first status write). A process that starts, or takes
// the lead, loads a pool's table at its first need, from the API server rather than the
// cache: the slots' ServiceAccounts, the Runners naming one in status.containerHook,
// and the pods using one's ServiceAccount (load). A slot that none of them names may
// still hold what the hook of a runner left — a runner whose claim was never written to
// its status and whose pod is gone — so it is dirty: before this process gives it to a
// runner, it deletes every hook pod and Secret there (sweepSlot). A slot this process
// saw released is clean: its runner went only after its finalizer removed what its hook
// made (removeHookObjects).

// HookSlots is the claim table of every pool's hook slots in this process; the Runner
// reconciler claims from it and the RunnerPool reconciler prunes idle slots through it.
// The zero value is ready to use.
type HookSlots struct {
	mu    sync.Mutex
	pools map[types.UID]*poolSlots
}

// poolSlots are one pool's slots.
type poolSlots struct {
	slots map[int]*slotState
	// held is the slot each holder holds.
	held map[string]int
}

// slotState is one slot as this process knows it.
type slotState struct {
	// holder is the runner holding the slot; "" none, or one this process saw gone.
	holder string
	// since is when the slot was last claimed, or when the table was loaded.
	since time.Time
	// dirty: loaded without a holder, and not swept since (sweepSlot).
	dirty bool
	// pruning: the pool is deleting the slot (Prunable); no claim takes it.
	pruning bool
}

// hold makes runner the holder of slot n.
func (ps *poolSlots) hold(n int, runner string, now time.Time) {
	st := ps.slots[n]
	if st.holder != "" && ps.held[st.holder] == n {
		delete(ps.held, st.holder)
	}
	st.holder, st.since = runner, now
	if runner != "" {
		ps.held[runner] = n
	}
}

// release forgets slot n's holder, seen gone.
func (ps *poolSlots) release(n int) {
	st := ps.slots[n]
	if ps.held[st.holder] == n {
		delete(ps.held, st.holder)
	}
	st.holder = ""
}

// Forget drops what is known of a pool's slots (the pool is gone): a pool of that UID
// is never seen again.
func (h *HookSlots) Forget(pool types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pools, pool)
}

// pool is the pool's table, loaded (load) when this process has none. Called with h.mu
// held: the reads of a load are made under the lock, once per pool and process.
func (h *HookSlots) pool(ctx context.Context, api ctrl.Reader, pool *v1alpha1.RunnerPool, now time.Time) (*poolSlots, error) {
	if ps := h.pools[pool.UID]; ps != nil {
		return ps, nil
	}
	ps, err := load(ctx, api, pool, now)
	if err != nil {
		return nil, err
	}
	if h.pools == nil {
		h.pools = map[types.UID]*poolSlots{}
	}
	h.pools[pool.UID] = ps
	return ps, nil
}

// load reads a pool's slots from the API server: its slots' ServiceAccounts; the holder
// of each, as its Runner's status.containerHook and the pod using its ServiceAccount
// say; and, where neither does, the slot marked dirty. Every slot counts as claimed at
// now (Prunable).
func load(ctx context.Context, api ctrl.Reader, pool *v1alpha1.RunnerPool, now time.Time) (*poolSlots, error) {
	var sas corev1.ServiceAccountList
	if err := api.List(ctx, &sas, ctrl.InNamespace(pool.Namespace), HookSlotsOf(pool)); err != nil {
		return nil, fmt.Errorf("listing the pool's hook ServiceAccounts: %w", err)
	}
	ps := &poolSlots{slots: map[int]*slotState{}, held: map[string]int{}}
	bySA := map[string]int{}
	for _, sa := range sas.Items {
		if n, err := strconv.Atoi(sa.Labels[LabelHookSlot]); err == nil && sa.DeletionTimestamp.IsZero() {
			ps.slots[n] = &slotState{since: now}
			bySA[sa.Name] = n
		}
	}
	if len(ps.slots) == 0 {
		return ps, nil
	}
	mine := ctrl.MatchingLabels{v1alpha1.LabelPool: pool.Name}
	var runners v1alpha1.RunnerList
	if err := api.List(ctx, &runners, ctrl.InNamespace(pool.Namespace), mine); err != nil {
		return nil, fmt.Errorf("listing the pool's runners: %w", err)
	}
	for _, rn := range runners.Items {
		if hook := rn.Status.ContainerHook; hook != nil && rn.Spec.PoolName == pool.Name {
			if n, ok := bySA[hook.ServiceAccount]; ok {
				ps.hold(n, rn.Name, now)
			}
		}
	}
	var pods corev1.PodList
	if err := api.List(ctx, &pods, ctrl.InNamespace(pool.Namespace), mine); err != nil {
		return nil, fmt.Errorf("listing the pool's pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if n, ok := bySA[p.Spec.ServiceAccountName]; ok {
			holder := p.Labels[v1alpha1.LabelRunner]
			if holder == "" {
				holder = p.Name
			}
			ps.hold(n, holder, now) // the pod binds the slot, whatever a status said
		}
	}
	for _, st := range ps.slots {
		st.dirty = st.holder == ""
	}
	return ps, nil
}

// Prunable marks and returns the slots of pool that may be deleted: loaded, not being
// pruned, claimed last at least idle before now, held by no runner among live, and
// whose ServiceAccount no pod in mounted uses. No claim takes a marked slot; Pruned
// says how its deletion went. The table is loaded from api if this process has none.
func (h *HookSlots) Prunable(ctx context.Context, api ctrl.Reader, pool *v1alpha1.RunnerPool, now time.Time, idle time.Duration,
	live, mounted map[string]bool) ([]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, err := h.pool(ctx, api, pool, now)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range slices.Sorted(maps.Keys(ps.slots)) {
		st := ps.slots[n]
		if st.pruning || now.Sub(st.since) < idle || mounted[v1alpha1.ContainerHookSlotServiceAccountName(pool.Name, n)] ||
			(st.holder != "" && live[st.holder]) {
			continue
		}
		st.pruning = true
		out = append(out, n)
	}
	return out, nil
}

// Pruned ends the pruning of slot n of pool: deleted, it leaves the table (a claim may
// make it again); not, it may be claimed again.
func (h *HookSlots) Pruned(pool types.UID, n int, deleted bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.pools[pool]
	if ps == nil || ps.slots[n] == nil {
		return
	}
	if !deleted {
		ps.slots[n].pruning = false
		return
	}
	ps.release(n)
	delete(ps.slots, n)
}

// holderOf is the slot runner holds in pool, if this process knows it.
func (h *HookSlots) holderOf(pool types.UID, runner string) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.pools[pool]
	if ps == nil {
		return 0, false
	}
	n, ok := ps.held[runner]
	return n, ok
}

// swept records that slot n of pool no longer holds what a runner's hook left.
func (h *HookSlots) swept(pool types.UID, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ps := h.pools[pool]; ps != nil && ps.slots[n] != nil {
		ps.slots[n].dirty = false
	}
}
