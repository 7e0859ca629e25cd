package e2e

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// TestRollingUpgrade rolls one 3-node cluster through every kind of roll,
// in order (a cluster boot is the expensive part):
//
//   - v1 (etcd of the previous minor) to v2 (the pinned etcd) under a
//     continuous writer: every node ends on the new slot, blessed; the
//     writer's history is linearizable (porcupine), and the cluster
//     version rises only after the last member moved;
//   - the nodes trust one signing key: an unsigned image, the same image
//     signed by another key, then signed by the trusted key but with its
//     boot layer changed in the registry (same size, still a valid gzip
//     tar), each stop the roll before any node writes a byte of its ESP;
//   - a bad image rolled like a good one: a broken etcd, so the gate
//     fails; the first node returns to its old slot by itself, the roll
//     stops with the reason, and the cluster is healthy (the images that
//     fail before any gate, on the node alone, are tried on one node in
//     TestBadSlots: the same rollback, at a third of the cost);
//   - back to the previous minor (v3): the roll enables etcd's downgrade
//     first, every node ends on the new slot, and the data is all there.
//     The bad roll left the bad image staged ahead, held, on the nodes
//     it never reached: this roll overwrites it.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	prev, prevBin := testenv.PreviousEtcd(t)
	cur := etcdModuleVersion(t)
	dir := t.TempDir()
	initBin := buildInit(t)
	img := func(name string) string { return filepath.Join(dir, name) }
	// v1 (the previous etcd minor, a separate /usr/bin/etcd) boots
	// through the firmware and v2 (the init's own etcd) by kexec with the
	// default compression; the downgrade kexecs v3 with the fast one, so a roll
	// boots both. The bad etcd and v4 (refused before it is staged)
	// need no more than the fast one.
	require.NoError(t, buildImages(t,
		rollImage{initBin, prevBin, "e2e-v1", "", img("v1.img"), ""},
		rollImage{initBin, "", "e2e-v2", "", img("v2.tar"), ""},
		rollImage{initBin, prevBin, "e2e-v3", "", img("v3.tar"), image.CompressionFast},
		rollImage{initBin, testenv.Bin(t, "etcdctl"), "e2e-bad-etcd", "", img("bad-etcd.tar"), image.CompressionFast},
		rollImage{initBin, "", "e2e-v4", "", img("v4.tar"), image.CompressionFast},
	))
	// The nodes stage only images signed by trusted; the test signs every
	// image it rolls with it, but v4.
	trusted, trustedPub := signingKey(t)
	untrusted, _ := signingKey(t)
	// One try: a slot that fails its first boot is given up, so the
	// firmware's next boot is the old slot.
	c := startCluster(t, cluster.Config{
		Dir: img("c"), Image: img("v1.img"),
		Upgrade: cluster.Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: 90 * time.Second, TrustedKeys: []string{trustedPub}},
	}, 3).Cluster
	prevMinor, curMinor := minorOf(t, prev), minorOf(t, cur)
	// A new cluster decides its version a moment after it serves: wait.
	waitClusterVersion(t, c, prevMinor.String()+".0", time.Minute)

	var final map[string]string // the writer's keys after the first roll
	ok := t.Run("v1 to v2 across an etcd minor under writes", func(t *testing.T) {
		ref := pushSigned(t, c, img("v2.tar"), trusted)
		tc, err := c.TLS()
		require.NoError(t, err)
		marks := consoleMarks(t, c)
		watches := watchEveryNode(t, c, tc, "e2e/watched/")
		w, err := kvwriter.Start(c.Endpoints(), tc)
		require.NoError(t, err)
		samples := sampleVersions(t, c)
		r := newRoll(t, c, ref)
		r.ImageEtcd = cur
		ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
		defer cancel()
		start := time.Now()
		err = r.Run(ctx)
		rollTime := time.Since(start)
		res, werr := w.Stop(30 * time.Second)
		require.NoError(t, err)
		require.NoError(t, werr)
		t.Logf("roll of 3 nodes: %s; writer: %d operations, %d acknowledged puts, longest write gap %s, ending %s into the roll",
			rollTime.Round(time.Second), len(res.History), res.Acked, res.Gap.Round(time.Millisecond), res.GapEnd.Sub(start).Round(time.Second))
		assert.Positive(t, res.Acked)

		assertAllOn(t, c, "b", "e2e-v2", cur)
		assert.Equal(t, porcupine.Ok, res.Check(3*time.Minute), "the writer's history is linearizable: no acknowledged write lost")
		// Each node jumped into its armed slot with kexec, once, the try
		// counted first; the firmware did not run. The kernel it jumped
		// into was loaded when the slot was staged ahead, not in the
		// shutdown.
		assertConsoles(t, c, marks, `reboot: kexec into slot b, its try counted as systemd-boot counts it \(etcdbox-b\+1\.conf -> etcdbox-b\+0-1\.conf\); its kernel and initrd loaded ahead, at staging`, 1)
		assertConsoles(t, c, marks, `upgrade: slot b's kernel and initrd loaded ahead for its kexec in `, 1)
		// Its NIC went down first, so that no receive poll spins on the
		// device the kernel's shutdown stops.
		assertConsoles(t, c, marks, `etcdbox: network: eth0 down before the kexec`, 1)
		// Each node's etcd stop ended the connection of the watch on it
		// after the drain, rather than wait out etcd's request timeout,
		// and every watch resumed on its node, from where it was.
		assertConsoles(t, c, marks, `stop etcd \(pid \d+\): ended [1-9]\d* of its [1-9]\d* client connections still open 2s after SIGTERM`, 1)
		watches.sees(t, "after the roll", 2*time.Minute)

		// The cluster version: the previous minor for as long as any
		// member runs it, the new one once the last has moved.
		waitClusterVersion(t, c, curMinor.String()+".0", time.Minute)
		hist := samples.stop()
		require.NotEmpty(t, hist)
		sawTwoOfThree := false
		for _, s := range hist {
			if s.cluster == "" {
				continue
			}
			cv := minorOf(t, s.cluster)
			onPrev, onCur := s.count(t, prevMinor), s.count(t, curMinor)
			if onPrev > 0 {
				assert.Equal(t, prevMinor, cv, "at %s members ran %v and the cluster version was %s already", s.at, s.members, s.cluster)
			}
			if onPrev == 1 && onCur == 2 && cv == prevMinor {
				sawTwoOfThree = true
			}
		}
		assert.True(t, sawTwoOfThree, "a sample shows two members on %s and the cluster version still %s: %v", curMinor, prevMinor, hist)
		final = readKeys(t, c)
	})
	require.True(t, ok, "the first roll failed; the others start from it")

	t.Run("unsigned, untrusted, tampered: the roll stops before any node writes", func(t *testing.T) {
		ref := pushImage(t, c, img("v4.tar"))
		before := map[string]map[string]espFile{}
		for _, n := range c.Nodes() {
			vm, err := c.VM(n.Name)
			require.NoError(t, err)
			before[n.Name] = slotFiles(settledESP(t, vm), "a")
		}
		for _, tt := range []struct {
			name    string
			prepare func()
			reason  string // what the refusal says, after "image <ref>"
		}{
			{"unsigned", func() {}, " refused: the image is not signed"},
			{"signed by an untrusted key", func() { signRef(t, c, ref, untrusted) }, " refused: no signature by a trusted key"},
			// Signed by the trusted key, so that only the digest pin
			// stands between the registry's bytes and the slot.
			{"a same-size tampered boot layer", func() {
				signRef(t, c, ref, trusted)
				h := tamperBootLayer(t, c, ref)
				t.Logf("layer %s changed in the registry's store", h)
			}, ": layer 1: "},
		} {
			tt.prepare()
			slots := nodeSlots(t, c)
			marks := consoleMarks(t, c)
			r := newRoll(t, c, ref)
			r.ImageEtcd = cur
			ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
			err := r.Run(ctx)
			cancel()
			require.Error(t, err, tt.name)
			t.Logf("%s: %v", tt.name, err)
			for _, n := range c.Nodes() {
				assert.Contains(t, err.Error(), "node "+n.Name+": staging ahead: staging failed: image "+ref+tt.reason, tt.name)
				vm, err := c.VM(n.Name)
				require.NoError(t, err)
				assert.NotContains(t, vm.Console()[marks[n.Name]:], "staged in slot", "%s: %s wrote a slot", tt.name, n.Name)
			}
			if tt.reason == ": layer 1: " {
				assert.Contains(t, err.Error(), "error verifying sha256 checksum", "the digest pin refused the layer")
			}
			assert.Equal(t, slots, nodeSlots(t, c), "%s: a slot changed", tt.name)
		}
		// Not a byte of the inactive slot (a: every node runs b) changed:
		// its kernel, initrd, entry and records. (The active slot's
		// blessed entry was seen to reach the disk late, after the first
		// roll, so the whole ESP is not compared.)
		for _, n := range c.Nodes() {
			vm, err := c.VM(n.Name)
			require.NoError(t, err)
			after := slotFiles(settledESP(t, vm), "a")
			require.NotEmpty(t, after, "%s: slot a has files", n.Name)
			assert.Equal(t, before[n.Name], after, "%s: slot a's files changed", n.Name)
		}
	})

	// The bad images that fail on the node itself are tried on one node
	// in TestBadSlots; this one needs the gate.
	bad := []badSlot{
		// Its etcd (etcdctl) exits at once, every time: the gate gives
		// the slot up after upgrade.CrashLimit exits, not at its limit.
		{"broken etcd fails the gate", "bad-etcd.tar", "etcdbox: slot a rolled back: ", "", `gate failed: etcd exited \d+ times in this slot and never served \(last: exit status \d+\)$`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			ref := pushSigned(t, c, img(tt.image), trusted)
			marks := consoleMarks(t, c)
			r := newRoll(t, c, ref)
			r.ImageEtcd = cur // the images say which etcd they carry; these run it or nothing
			ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
			defer cancel()
			start := time.Now()
			err := r.Run(ctx)
			require.Error(t, err)
			t.Logf("%s: roll stopped after %s: %v", tt.name, time.Since(start).Round(time.Second), err)
			m := regexp.MustCompile(`^node (n\d) rolled back: (.*)$`).FindStringSubmatch(err.Error())
			require.NotNil(t, m, "the roll says which node rolled back and why: %v", err)
			assert.Regexp(t, "^slot a: "+tt.reason, m[2])

			vm, err := c.VM(m[1])
			require.NoError(t, err)
			ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			assertTriedOnce(ctx, t, vm, marks[m[1]], "a", "b", tt)
			// In by kexec, out by the firmware: the gate's reboot back
			// to the blessed slot never jumps.
			assert.Contains(t, vm.Console()[marks[m[1]]:], "reboot: through the firmware: slot b is blessed (etcdbox-b.conf), not freshly armed")

			// The cluster is healthy, every node still on v2.
			c2 := waitClusterHealthy(t, r, 3*time.Minute)
			for _, n := range c2.Nodes {
				assert.Equal(t, "b", n.Status.Slot, "%s still runs slot b", n.Name)
				assert.Equal(t, "e2e-v2", n.Status.Version, n.Name)
				if n.Name == m[1] {
					assert.Equal(t, nodeapi.SlotBad, slotState(n.Status, "a"), "%s: the bad slot is given up: %+v", n.Name, n.Status.Slots)
					assert.Equal(t, m[2], n.Status.LastRollback, "the node API says why, as the roll did")
				} else {
					// Staged ahead, never armed: the next roll (the
					// downgrade below) overwrites it.
					assert.Equal(t, nodeapi.SlotHeld, slotState(n.Status, "a"), "%s: the bad image is staged ahead, held: %+v", n.Name, n.Status.Slots)
				}
			}
		})
	}

	t.Run("v2 to v3 back to the previous minor", func(t *testing.T) {
		ref := pushSigned(t, c, img("v3.tar"), trusted)
		marks := consoleMarks(t, c)
		r := newRoll(t, c, ref)
		r.ImageEtcd = prev
		// This roll keeps the firmware path covered: --no-kexec.
		r.NoKexec = true
		var log []string
		var mu sync.Mutex
		r.Log = func(format string, args ...any) {
			mu.Lock()
			log = append(log, fmt.Sprintf(format, args...))
			mu.Unlock()
			t.Logf(format, args...)
		}
		ctx, cancel := context.WithTimeout(t.Context(), rollDeadline)
		defer cancel()
		start := time.Now()
		require.NoError(t, r.Run(ctx))
		t.Logf("downgrade roll of 3 nodes: %s", time.Since(start).Round(time.Second))
		mu.Lock()
		all := strings.Join(log, "\n")
		mu.Unlock()
		assert.Contains(t, all, "enabling etcd's downgrade to "+prevMinor.String())
		assert.Less(t, strings.Index(all, "enabling etcd's downgrade"), strings.Index(all, "staging "), "the downgrade is enabled before any node stages")
		assertAllOn(t, c, "a", "e2e-v3", prev)
		assertConsoles(t, c, marks, `reboot: through the firmware: as asked \(no kexec\)`, 1)
		assertConsoles(t, c, marks, `reboot: kexec into`, 0)
		waitClusterVersion(t, c, prevMinor.String()+".0", time.Minute)
		assert.Equal(t, final, readKeys(t, c), "the writer's keys read back as the first roll left them")
	})
}

// assertConsoles checks that every node's console after its mark holds
// n lines that match re.
func assertConsoles(t *testing.T, c *cluster.Cluster, marks map[string]int64, re string, n int) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for _, node := range c.Nodes() {
		vm, err := c.VM(node.Name)
		require.NoError(t, err)
		got := rx.FindAllString(vm.Console()[marks[node.Name]:], -1)
		assert.Len(t, got, n, "%s: lines matching %q since the mark", node.Name, re)
	}
}

// assertAllOn checks that every node booted slot, blessed, and runs the
// image version with etcd.
func assertAllOn(t *testing.T, c *cluster.Cluster, slot, version, etcd string) {
	t.Helper()
	for _, n := range c.Nodes() {
		st, err := nodeAPI(t, c, n).Status(t.Context())
		require.NoError(t, err)
		assert.Equal(t, slot, st.Slot, "%s booted slot", n.Name)
		assert.True(t, st.Blessed, "%s blessed", n.Name)
		assert.Equal(t, version, st.Version, "%s image version", n.Name)
		assert.Equal(t, etcd, st.EtcdVersion, "%s etcd", n.Name)
	}
}

// etcdModuleVersion is the pinned etcd's version, from bin/etcd's build
// information ("3.7.3").
func etcdModuleVersion(t *testing.T) string {
	t.Helper()
	bi, err := buildinfo.ReadFile(testenv.Bin(t, "etcd"))
	require.NoError(t, err)
	require.Equal(t, "go.etcd.io/etcd/server/v3", bi.Main.Path)
	return strings.TrimPrefix(bi.Main.Version, "v")
}

func minorOf(t *testing.T, v string) rollout.Minor {
	t.Helper()
	m, err := rollout.ParseMinor(v)
	require.NoError(t, err)
	return m
}

// observer is a roll that is never run, for its Observe.
func observer(t *testing.T, c *cluster.Cluster) *rollout.Roll {
	return newRoll(t, c, "registry.invalid/unused@sha256:"+strings.Repeat("0", 64))
}

// waitClusterVersion waits until the cluster version is want.
func waitClusterVersion(t *testing.T, c *cluster.Cluster, want string, within time.Duration) {
	t.Helper()
	o := observer(t, c)
	deadline := time.Now().Add(within)
	for {
		obs, err := o.Observe(t.Context())
		if err == nil && obs.ClusterVersion == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "cluster version %q after %s (%v), want %s", obs.ClusterVersion, within, err, want)
		time.Sleep(time.Second) // polling interval, bounded by the deadline
	}
}

// waitClusterHealthy waits until the roll's preconditions hold again.
func waitClusterHealthy(t *testing.T, r *rollout.Roll, within time.Duration) rollout.Cluster {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := r.Observe(t.Context())
		if err == nil {
			err = rollout.Check(c)
		}
		if err == nil {
			return c
		}
		require.True(t, time.Now().Before(deadline), "the cluster is not healthy within %s: %v", within, err)
		time.Sleep(2 * time.Second) // polling interval, bounded by the deadline
	}
}

// readKeys reads every key the writer wrote.
func readKeys(t *testing.T, c *cluster.Cluster) map[string]string {
	t.Helper()
	n := c.Nodes()[0]
	r, err := client(t, c, n.Name).Get(t.Context(), kvwriter.Prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range r.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	require.NotEmpty(t, out, "the writer's keys")
	return out
}

// versionSample is what the members said at one moment.
type versionSample struct {
	at      time.Duration
	cluster string
	members []string // server versions of the members that answered
}

func (s versionSample) count(t *testing.T, m rollout.Minor) int {
	n := 0
	for _, v := range s.members {
		if minorOf(t, v) == m {
			n++
		}
	}
	return n
}

type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	hist   []versionSample
}

func (s *sampler) stop() []versionSample {
	s.cancel()
	<-s.done
	return s.hist
}

// sampleVersions records the cluster version and the members' versions
// every second until stopped.
func sampleVersions(t *testing.T, c *cluster.Cluster) *sampler {
	o := observer(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			obs, err := o.Observe(ctx)
			if err == nil {
				vs := versionSample{at: time.Since(start).Round(time.Millisecond), cluster: obs.ClusterVersion}
				for _, m := range obs.Members {
					if m.Version != "" {
						vs.members = append(vs.members, m.Version)
					}
				}
				s.hist = append(s.hist, vs)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// buildBadImage builds an OCI tarball at out from the default inputs with
// drivers and cmdline.
func buildBadImage(t *testing.T, initBin, version, out string, drivers []string, cmdline string) {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	_, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules, Init: initBin,
		Drivers: drivers, Cmdline: cmdline, Format: image.FormatOCI, Output: out, Version: version,
		// Bad images never get far enough for the initrd's size to
		// matter; the fast setting saves the suite seconds each.
		Compression: image.CompressionFast,
	})
	require.NoError(t, err)
}
