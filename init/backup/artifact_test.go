package backup

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPushListPull pushes a kept snapshot to an in-process registry on
// loopback, lists it, pulls it back by digest whole, and refuses a ref
// that is not a backup and a tampered blob.
func TestPushListPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	reg := Registry{Repository: host + "/etcdbox/backups", Insecure: true}

	dir := t.TempDir()
	snap, err := Save(dir, bytes.NewReader(etcdSnapshot(t, 20)), "n2", time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), 3)
	require.NoError(t, err)
	ref, err := Push(t.Context(), reg, snap, "demo")
	require.NoError(t, err)
	assert.True(t, IsRef(ref), ref)
	assert.Contains(t, ref, host+"/etcdbox/backups@sha256:")

	list, err := ListPushed(t.Context(), reg)
	require.NoError(t, err)
	require.Len(t, list, 1)
	p := list[0]
	assert.Equal(t, ref, p.Ref)
	assert.Equal(t, "demo", p.Cluster)
	assert.Equal(t, "n2", p.Member)
	assert.Equal(t, snap.Revision, p.Revision)
	assert.Equal(t, snap.Keys, p.Keys)
	assert.Equal(t, snap.SHA256, p.SHA256)
	assert.Equal(t, snap.Size, p.Size)
	assert.True(t, snap.Taken.Equal(p.Taken))

	out := filepath.Join(t.TempDir(), "pulled.db")
	f, err := os.Create(out)
	require.NoError(t, err)
	got, err := Pull(t.Context(), reg, ref, f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	assert.Equal(t, p.SHA256, got.SHA256)
	st, err := Verify(out)
	require.NoError(t, err)
	assert.Equal(t, snap.Stats, st, "the pulled snapshot is the kept one")

	_, err = Pull(t.Context(), reg, host+"/etcdbox/backups@sha256:"+strings.Repeat("0", 64), &bytes.Buffer{})
	assert.Error(t, err, "an unknown digest")
	assert.False(t, IsRef(snap.Name))
	assert.False(t, IsRef("/tmp/x.db"))
}
