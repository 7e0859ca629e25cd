package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// Rolling upgrades as rounds of `make chaos`: a roll of the whole cluster
// to another image, with one of the one-node faults striking at a random
// point of it (staging, a hand-over, a node's reboot, its gate, or the
// wait before the next node). The round's writer, its porcupine check and
// the lifecycle's promises (one cluster, every member ID kept) are the
// chaos loop's, as for any round. On top of them a roll round checks what
// a roll promises:
//
//   - a roll that returns no error left every node on the new image,
//     blessed, a healthy voter;
//   - a roll that stops (a node rolled back, or did not come back in
//     time, or the preconditions did not hold) leaves every node blessed
//     on either the image it ran before or the new one, never on
//     probation and never on anything else; the next roll round rolls to
//     the same image again, and resumes it.
//
// The two images are the cluster image's init (bin/init-testhooks, with
// its own etcd) under two versions, built once in OCI form and pushed to
// the cluster's registry; a completed roll is followed by one to the
// other image, so the nodes swap slots at each.
type chaosRolls struct {
	c      *cluster.Cluster
	rng    *rand.Rand
	during []chaosFault // the faults a roll is drawn with
	dir    string       // the images' directory, the whole test's

	once     sync.Once
	etcd     string    // the images' etcd version
	refs     [2]string // the images in the registry, by digest
	versions [2]string
	target   int    // the next roll's image
	from     string // the version every node ran before the roll under way

	completed, stopped int
}

// newChaosRolls prepares the roll rounds of t's cluster c; the images are
// built at the first. ETCDBOX_CHAOS_ROLL_FAULTS=a,b draws, during rolls,
// only the faults whose names contain a or b.
func newChaosRolls(t *testing.T, c *cluster.Cluster, rng *rand.Rand, during []chaosFault) *chaosRolls {
	t.Helper()
	if only := os.Getenv("ETCDBOX_CHAOS_ROLL_FAULTS"); only != "" {
		during = named(during, only)
		require.NotEmpty(t, during, "ETCDBOX_CHAOS_ROLL_FAULTS=%q names no one-node fault", only)
	}
	r := &chaosRolls{c: c, rng: rng, during: during, dir: t.TempDir(),
		versions: [2]string{"e2e-chaos-a", "e2e-chaos-b"}, from: "e2e-cluster"}
	t.Cleanup(func() {
		if r.completed+r.stopped > 0 {
			t.Logf("rolls: %d completed, %d stopped (each resumed by the next roll round)", r.completed, r.stopped)
		}
	})
	return r
}

// images builds and pushes the two images, once.
func (r *chaosRolls) images(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.etcd = etcdModuleVersion(t)
		initBin := testenv.Bin(t, "init-testhooks")
		var imgs []rollImage
		for _, v := range r.versions {
			imgs = append(imgs, rollImage{initBin: initBin, version: v, out: filepath.Join(r.dir, v+".tar")})
		}
		require.NoError(t, buildImages(t, imgs...))
		for i, v := range r.versions {
			r.refs[i] = pushImage(t, r.c, filepath.Join(r.dir, v+".tar"))
		}
	})
	require.NotEmpty(t, r.refs[1], "the roll images were not built")
}

// round rolls the cluster to the target image while one drawn fault
// strikes, and checks where the roll left every node.
func (r *chaosRolls) round(ctx context.Context, t *testing.T) string {
	r.images(t)
	f := r.during[r.rng.IntN(len(r.during))]
	ref, version := r.refs[r.target], r.versions[r.target]
	t.Logf("rolling from %s to %s (%s); the fault: %s", r.from, version, ref, f.name)

	roll := newRoll(t, r.c, ref)
	roll.ImageEtcd = r.etcd
	rctx, cancel := context.WithTimeout(ctx, rollDeadline)
	var err error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		err = roll.Run(rctx)
	}()
	// The roll logs to t: it must have ended before t does, also when a
	// fault's require ends the round early.
	defer func() {
		cancel()
		<-finished
	}()

	// A roll of three nodes takes two and a half to three minutes here;
	// the fault strikes somewhere in the first two, or, in a third of the
	// rounds, in the first 15 s, while the nodes stage ahead (8-13 s).
	window := 2 * time.Minute
	if r.rng.IntN(3) == 0 {
		window = 15 * time.Second
	}
	delay := time.Duration(r.rng.Int64N(int64(window)))
	select {
	case <-finished:
		t.Logf("the roll ended before the fault was due")
	case <-time.After(delay):
		t.Logf("the fault strikes %s into the roll", delay.Round(time.Second))
	case <-ctx.Done():
	}
	f.run(ctx, t)
	select {
	case <-finished:
	case <-ctx.Done():
		require.FailNow(t, "the roll did not end within the round", "%v", ctx.Err())
	}

	allowed := []string{r.from, version}
	if err != nil {
		r.stopped++
		t.Logf("the roll stopped: %v", err)
	} else {
		r.completed++
		t.Logf("the roll completed")
	}
	// Whatever the roll did, every node comes to rest blessed on an image
	// it was given, as a healthy voter (a node the fault restarted may
	// still be booting, or in its gate).
	wctx, wcancel := context.WithTimeout(ctx, faultDeadline)
	defer wcancel()
	on := map[string]string{}
	for _, n := range r.c.Nodes() {
		api := nodeAPI(t, r.c, n)
		var st nodeapi.Status
		waitFor(wctx, t, n.Name+" blessed on "+fmt.Sprint(allowed)+", a healthy voter", func() (bool, string) {
			var serr error
			st, serr = api.Status(wctx)
			if serr != nil {
				return false, serr.Error()
			}
			return st.Blessed && st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter && slices.Contains(allowed, st.Version),
				fmt.Sprintf("slot %s, blessed %t, version %s, healthy %t, role %s", st.Slot, st.Blessed, st.Version, st.Member.Healthy, st.Member.Role)
		})
		on[n.Name] = st.Version
		if err == nil {
			assert.Equal(t, version, st.Version, "the roll completed, and %s runs %s, not the roll's image", n.Name, st.Version)
		}
	}
	t.Logf("the nodes run %v", on)
	// The next roll goes to the other image once every node runs this
	// one (a roll can stop after its last node moved); until then it
	// rolls to this one again.
	if !slices.ContainsFunc(slices.Collect(maps.Values(on)), func(v string) bool { return v != version }) {
		r.from, r.target = version, 1-r.target
	}
	return ""
}
