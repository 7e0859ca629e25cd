package upgrade

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
)

// agentRegistry is go-containerregistry's registry on loopback, counting
// the manifest pulls.
type agentRegistry struct {
	host  string
	pulls atomic.Int32
}

func newAgentRegistry(t *testing.T) *agentRegistry {
	r := &agentRegistry{}
	reg := registry.New()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
			r.pulls.Add(1)
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(s.Close)
	r.host = strings.TrimPrefix(s.URL, "http://")
	return r
}

// push pushes a linux/amd64 image whose boot layer holds kernel and
// initrd, and returns its digest reference.
func (r *agentRegistry) push(t *testing.T, kernel, initrd string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range [][2]string{{"boot/vmlinuz", kernel}, {"boot/initrd", initrd}, {"boot/cmdline", ""}} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(f[1]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	layer, err := tarball.LayerFromReader(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	require.NoError(t, err)
	ref, err := name.ParseReference(r.host+"/etcdbox:test", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	d, err := img.Digest()
	require.NoError(t, err)
	return r.host + "/etcdbox@" + d.String()
}

// agentNode is the agent of a node booted from slot a of a fresh builder
// ESP, whose seed allows reg.
func agentNode(t *testing.T, reg *agentRegistry) *Agent {
	dir := t.TempDir()
	files := map[string]string{
		"loader/entries/etcdbox-a.conf": "title etcdbox (slot a)\nversion 1\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\ninitrd /etcdbox/a/initrd\noptions console=ttyS0 panic=10 etcdbox.slot=a\n",
		"etcdbox/a/vmlinuz":             "old kernel",
		"etcdbox/a/initrd":              "old initrd",
	}
	for p, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	a := &Agent{ESP: slot.Dir(dir), Booted: "a", Logf: t.Logf}
	a.Seed.Registries = []string{reg.host}
	a.Seed.InsecureRegistries = []string{reg.host}
	return a
}

// waitPhase waits for the agent to leave the working phases and returns
// where it ended.
func waitPhase(t *testing.T, a *Agent) nodeapi.UpgradeProgress {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := a.Progress()
		if p.Phase != nodeapi.PhasePulling && p.Phase != nodeapi.PhaseWriting {
			return p
		}
		require.True(t, time.Now().Before(deadline), "staging still %s", p.Phase)
		time.Sleep(10 * time.Millisecond)
	}
}

func slotB(t *testing.T, a *Agent) slot.Slot {
	t.Helper()
	st, err := slot.Read(a.ESP)
	require.NoError(t, err)
	return st.Slots["b"]
}

// TestStageAheadAndArm drives the upgrade agent against a real registry:
// a held stage writes slot b but leaves slot a to boot; staging the same
// digest again pulls nothing; arm refuses another image and arms this
// one; a second roll's hold takes the armed slot back; a boot file that
// no longer matches its record is pulled again.
func TestStageAheadAndArm(t *testing.T) {
	reg := newAgentRegistry(t)
	a := agentNode(t, reg)
	ref := reg.push(t, "new kernel", "new initrd")
	other := reg.push(t, "other kernel", "other initrd")
	ctx := t.Context()

	require.NoError(t, a.Stage(ctx, ref, true))
	p := waitPhase(t, a)
	require.Equal(t, nodeapi.PhaseHeld, p.Phase, "error: %s", p.Error)
	assert.Equal(t, int32(1), reg.pulls.Load())
	b := slotB(t, a)
	require.NotNil(t, b.Held)
	assert.Nil(t, b.Entry, "held: nothing to boot in slot b")
	st, err := slot.Read(a.ESP)
	require.NoError(t, err)
	assert.Equal(t, "a", st.Next(), "the next boot is still slot a")
	got, err := a.ESP.ReadFile("etcdbox/b/initrd")
	require.NoError(t, err)
	assert.Equal(t, "new initrd", string(got))

	// The roll asks again at the node's turn: nothing is pulled.
	require.NoError(t, a.Stage(ctx, ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, int32(1), reg.pulls.Load(), "the held digest is not pulled again")

	err = a.Arm(ctx, other)
	require.ErrorIs(t, err, server.ErrRefused)
	assert.ErrorContains(t, err, "slot b holds "+refDigest(ref)+", not "+refDigest(other))
	assert.NotNil(t, slotB(t, a).Held, "a refused arm leaves the slot held")

	require.NoError(t, a.Arm(ctx, ref))
	assert.Equal(t, nodeapi.PhaseStaged, a.Progress().Phase)
	b = slotB(t, a)
	require.NotNil(t, b.Entry)
	assert.Equal(t, slot.Trying, b.Status())
	st, err = slot.Read(a.ESP)
	require.NoError(t, err)
	assert.Equal(t, "b", st.Next(), "armed: the next boot tries slot b")
	require.NoError(t, a.Arm(ctx, ref), "arming again is fine")

	// An aborted roll left it armed; the next roll holds it again,
	// still without pulling.
	require.NoError(t, a.Stage(ctx, ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, int32(1), reg.pulls.Load())
	assert.NotNil(t, slotB(t, a).Held)

	// A boot file that is not what the record says is pulled again.
	require.NoError(t, a.ESP.WriteFile("etcdbox/b/initrd", strings.NewReader("rotten")))
	require.NoError(t, a.Stage(ctx, ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, int32(2), reg.pulls.Load(), "a changed boot file is pulled again")
	got, err = a.ESP.ReadFile("etcdbox/b/initrd")
	require.NoError(t, err)
	assert.Equal(t, "new initrd", string(got))

	// Another image replaces the held one.
	require.NoError(t, a.Stage(ctx, other, false))
	require.Equal(t, nodeapi.PhaseStaged, waitPhase(t, a).Phase)
	assert.Equal(t, int32(3), reg.pulls.Load())
	assert.Equal(t, slot.Trying, slotB(t, a).Status())
	err = a.Arm(ctx, ref)
	assert.ErrorIs(t, err, server.ErrRefused, "slot b holds the other image now")
}

// TestArmWithoutStage: a node with nothing staged refuses to arm, naming
// what it holds.
func TestArmWithoutStage(t *testing.T) {
	reg := newAgentRegistry(t)
	a := agentNode(t, reg)
	ref := reg.push(t, "k", "i")
	err := a.Arm(t.Context(), ref)
	require.ErrorIs(t, err, server.ErrRefused)
	assert.ErrorContains(t, err, "slot b holds no staged image")
	assert.Zero(t, reg.pulls.Load())
}

func refDigest(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

// TestStagingPanicFails: a panic while staging fails that staging, with
// the reason, and the agent stages again afterwards; the init lives on.
func TestStagingPanicFails(t *testing.T) {
	reg := newAgentRegistry(t)
	a := agentNode(t, reg)
	ref := reg.push(t, "k", "i")
	defer func(h func(string)) { supervise.BeforeRun = h }(supervise.BeforeRun)
	var once sync.Once
	supervise.BeforeRun = func(name string) {
		if strings.HasPrefix(name, "staging of ") {
			once.Do(func() { panic("a bug in the agent") })
		}
	}
	require.NoError(t, a.Stage(t.Context(), ref, false))
	p := waitPhase(t, a)
	require.Equal(t, nodeapi.PhaseFailed, p.Phase)
	assert.Equal(t, "staging of "+ref+" panicked: a bug in the agent", p.Error)

	require.NoError(t, a.Stage(t.Context(), ref, false))
	assert.Equal(t, nodeapi.PhaseStaged, waitPhase(t, a).Phase, "the agent stages again")
}

// TestStagingHooks: the agent says before it writes a slot's files
// (Writing) and once the slot is complete (Staged), with the entry's
// command line and the record of the files, so the init can load the
// kernel for the kexec ahead; a reused slot is Staged without Writing.
func TestStagingHooks(t *testing.T) {
	reg := newAgentRegistry(t)
	a := agentNode(t, reg)
	ref := reg.push(t, "new kernel", "new initrd")
	var mu sync.Mutex
	var calls []string
	a.Writing = func(target string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, "writing "+target)
	}
	a.Staged = func(target string, e slot.Entry, rec slot.Image) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("staged %s %q %s %t", target, e.Options, rec.Kernel[:8], rec.Digest == refDigest(ref)))
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	kernelSum := sha256.Sum256([]byte("new kernel"))
	staged := fmt.Sprintf("staged b %q %x true", "console=ttyS0 panic=10 etcdbox.slot=b", kernelSum[:4])

	require.NoError(t, a.Stage(t.Context(), ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, []string{"writing b", staged}, got())

	require.NoError(t, a.Stage(t.Context(), ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, []string{"writing b", staged, staged}, got(), "reused: nothing written")

	require.NoError(t, a.ESP.WriteFile("etcdbox/b/initrd", strings.NewReader("rotten")))
	require.NoError(t, a.Stage(t.Context(), ref, true))
	require.Equal(t, nodeapi.PhaseHeld, waitPhase(t, a).Phase)
	assert.Equal(t, []string{"writing b", staged, staged, "writing b", staged}, got(), "pulled again: written again")
}
