package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// TestCluster boots three VMs that share one image and one seed, which
// names only the SRV domain and the initial size, on the closed virtual
// network; then checks, on that one cluster (a cluster boot is the
// expensive part), in order:
//
//   - they form one cluster: three voting members, one cluster ID on
//     every node, every peer URL a DNS name, and a write through any node
//     reads back through every other;
//   - a guest's lookup of a name outside the cluster fails fast, the
//     network's DNS refused it, and nothing was routed;
//   - `add` scales it to five under writes, one node at a time (each
//     first a learner, then a voter; the three first members never
//     restart), then back to three under writes: `cluster remove`
//     (decommission) of n4, and `etcdbox members remove` of n5;
//   - the faults (testFaults): kill, pause and partition of the leader,
//     a one-way cut of the leader (it hears nothing) under writes, its
//     links lossy (20%) and slow (50 ms) under writes, the
//     leader's disk slowed to 1 request a second under writes (etcd
//     reports slow WAL syncs, and the node hands the leadership to a
//     follower), a replaced disk under writes, a full power-off and boots in three
//     orders (testBootOrders: each node first once, one node last after
//     writes), and a cold start of all three with one disk wiped and every
//     node renumbered;
//   - two of three disks wiped: no cluster forms (the last step: the
//     cluster then waits for an operator's recovery).
func TestCluster(t *testing.T) {
	r := upCluster(t, 3)
	c := r.Cluster
	ctx, cancel := context.WithTimeout(context.Background(), 8*clusterDeadline)
	defer cancel()

	ok := t.Run("three nodes form one cluster", func(t *testing.T) {
		checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})
		for _, writer := range []string{"n1", "n2", "n3"} {
			key, val := "e2e/from-"+writer, "written through "+writer
			_, err := client(t, c, writer).Put(ctx, key, val)
			require.NoError(t, err, "put through %s", writer)
			for _, reader := range []string{"n1", "n2", "n3"} {
				r, err := client(t, c, reader).Get(ctx, key) // linearizable
				require.NoError(t, err, "get %s through %s", key, reader)
				require.Len(t, r.Kvs, 1, "get %s through %s", key, reader)
				assert.Equal(t, val, string(r.Kvs[0].Value), "get %s through %s", key, reader)
			}
		}
	})
	require.True(t, ok, "the cluster did not form; the other steps need it")

	t.Run("outside names fail fast and nothing leaves", func(t *testing.T) {
		before, err := c.Network().Stats(ctx)
		require.NoError(t, err)
		// The control: the guest's resolver does reach the network's DNS.
		own := resolve(t, c, "n1", "n2."+c.Domain())
		require.Equal(t, http.StatusOK, own.status, "resolve a cluster name: %s", own.body)
		assert.Equal(t, "10.88.0.12", own.body)
		for _, name := range []string{"example.com", "etcd.io"} {
			r := resolve(t, c, "n1", name)
			t.Logf("resolve %s in the guest: %d after %s (host saw %s): %s", name, r.status, r.elapsed, r.wall.Round(time.Millisecond), r.body)
			assert.Equal(t, http.StatusBadGateway, r.status, "the guest resolved an outside name: %s", r.body)
			assert.Less(t, r.elapsed, 2*time.Second, "the lookup of %s did not fail fast", name)
		}
		after, err := c.Network().Stats(ctx)
		require.NoError(t, err)
		t.Logf("network stats before %+v, after %+v", before, after)
		assert.GreaterOrEqual(t, after.DNS.Refused-before.DNS.Refused, uint64(2), "the network's DNS did not refuse the outside names")
		assert.Equal(t, before.Gateway.NotForUs, after.Gateway.NotForUs, "a guest sent packets for the gateway to route")
	})

	ok = t.Run("add scales to five voters", func(t *testing.T) {
		old := []string{"n1", "n2", "n3"}
		started := map[string]string{}
		marks := map[string]int64{}
		for _, name := range old {
			started[name] = processStart(t, c, name)
			vm, err := c.VM(name)
			require.NoError(t, err)
			marks[name] = vm.Mark()
		}
		// n4 boots the qcow2 form of the image and n5 its VMDK form
		// (build --format): each boots and joins like the raw one. Neither
		// has the seed volume: each reads its seed from the cloud metadata
		// the network serves at 169.254.169.254. n4's EC2 breaks its
		// protocol (IMDSv1 only): n4 refuses it, says so, and takes GCE's;
		// n5's EC2 is a proper IMDSv2.
		forms := []struct{ node, format, source, from, refused string }{
			{"n4", "qcow2", "ec2-imdsv1,gce", "GCE metadata", "EC2 IMDSv2"},
			{"n5", "vmdk", "ec2", "EC2 IMDSv2", ""},
		}
		imgs := map[string]string{}
		for _, f := range forms {
			imgs[f.node] = clusterImageAs(t, image.Format(f.format), "etcdbox."+f.format)
		}
		// An operator follows n1's log across the scale-out.
		follow := followLogs(t, c, "n1")
		// Under the writer, on the three first nodes' endpoints.
		w := startWriter(t, c)
		for _, f := range forms {
			want := f.node
			actx, cancel := context.WithTimeout(ctx, clusterDeadline)
			j, err := c.AddNode(actx, cluster.AddOptions{Image: imgs[want], SeedSource: f.source})
			cancel()
			require.NoError(t, err, "add %s from the %s image, its seed from %s", want, f.format, f.source)
			assert.Equal(t, f.format, backingFormat(t, j.Node), "the disk of %s is not made from the %s image", want, f.format)
			checkSeedFrom(t, c, want, f.from, f.refused)
			assert.Equal(t, want, j.Node.Name)
			assert.True(t, j.AsLearner, "%s was never seen as a learner", want)
			t.Logf("add %s: a learner after %s, a voter after %s", j.Node.Name, j.Learner.Round(time.Second), j.Voter.Round(time.Second))
		}
		res := stopWriter(t, w)
		t.Logf("writer across the scale-out to five: %d acknowledged puts, longest gap %s", res.Acked, res.Gap.Round(10*time.Millisecond))
		// etcd on n1 logged each member it added, and logs -f printed it
		// as it came.
		for _, f := range forms {
			follow.waitFor(t, `"added-peer-peer-urls":["https://`+f.node+".")
		}
		follow.stop(t, c, "n1")
		all := []string{"n1", "n2", "n3", "n4", "n5"}
		checkOneCluster(ctx, t, c, all)
		for _, name := range old {
			assert.Equal(t, started[name], processStart(t, c, name), "etcd on %s restarted (process_start_time_seconds changed)", name)
			vm, err := c.VM(name)
			require.NoError(t, err)
			since := vm.Console()[marks[name]:]
			for _, restart := range []string{"etcdbox: etcd exited", "etcdbox: etcd: ", "Linux version"} {
				assert.NotContains(t, since, restart, "the console of %s shows a restart while nodes were added", name)
			}
		}
		rows, err := c.Status(ctx)
		require.NoError(t, err)
		leaders := 0
		for _, r := range rows {
			assert.Equal(t, "voter", r.Role(), "%s", r.Node.Name)
			assert.Equal(t, "healthy", r.Health, "%s", r.Node.Name)
			assert.Equal(t, "a", r.Slot, "%s", r.Node.Name)
			if r.Leader {
				leaders++
			}
		}
		assert.Equal(t, 1, leaders, "status: %+v", rows)
	})
	require.True(t, ok, "the scale-down needs five voters")
	ok = t.Run("decommission scales to four under writes", func(t *testing.T) { testRemove(ctx, t, c, "n4", false) })
	require.True(t, ok, "the next steps need four voters")
	ok = t.Run("members remove scales back to three under writes", func(t *testing.T) { testRemove(ctx, t, c, "n5", true) })
	require.True(t, ok, "the faults need the three first nodes")
	t.Run("a backup comes on the interval, verified, and is fetched whole", func(t *testing.T) { testBackups(ctx, t, c) })
	ok = t.Run("faults", func(t *testing.T) { testFaults(ctx, t, r) })
	require.True(t, ok, "the cluster is not whole after the faults; the other steps need it")
	c = r.Cluster // the cold start brought it up anew
	ok = t.Run("quorum lost for good: recover --survivor, fresh nodes join, an old member is refused", func(t *testing.T) { testRecover(ctx, t, c) })
	require.True(t, ok, "the next step needs the recovered cluster whole")
	ok = t.Run("restore to a snapshot taken under writes: every node fenced, a new cluster, watches compacted", func(t *testing.T) { testRestore(ctx, t, c) })
	require.True(t, ok, "the next step needs the restored cluster whole")
	ok = t.Run("CA rotated under writes in three phases, a power cut mid-reissue; the old CA refused after", func(t *testing.T) { testRotateCA(ctx, t, c) })
	require.True(t, ok, "the last step needs the rotated cluster whole, its seed made anew")
	t.Run("two of three disks wiped: no cluster forms, the survivor keeps its data", func(t *testing.T) { testTwoWiped(ctx, t, c) })
}

// checkOneCluster checks that names are the cluster's voting members, all
// started, that every node reports the same cluster ID and member list,
// and that every peer URL is the member's DNS name.
func checkOneCluster(ctx context.Context, t *testing.T, c *cluster.Cluster, names []string) {
	t.Helper()
	var clusterID uint64
	for _, name := range names {
		r, err := client(t, c, name).MemberList(ctx)
		require.NoError(t, err, "member list through %s", name)
		if clusterID == 0 {
			clusterID = r.Header.ClusterId
		}
		assert.Equal(t, fmt.Sprintf("%016x", clusterID), fmt.Sprintf("%016x", r.Header.ClusterId), "%s is in another cluster", name)
		var got []string
		for _, m := range r.Members {
			assert.False(t, m.IsLearner, "%s lists %s as a learner", name, m.Name)
			want := fmt.Sprintf("https://%s.%s:2380", m.Name, c.Domain())
			assert.Equal(t, []string{want}, m.PeerURLs, "%s lists the peer URLs of %q", name, m.Name)
			got = append(got, m.Name)
		}
		slices.Sort(got)
		assert.Equal(t, names, got, "%s lists %s", name, describe(r.Members))
	}
}

func describe(ms []*pb.Member) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s(%x learner=%v %v)", m.Name, m.ID, m.IsLearner, m.PeerURLs))
	}
	return strings.Join(parts, " ")
}
