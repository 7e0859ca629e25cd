package backup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoom(t *testing.T) {
	const M = 1 << 20
	kept := []Snapshot{{Name: "a", Size: 100 * M}, {Name: "b", Size: 200 * M}, {Name: "c", Size: 300 * M}}
	names := func(s []Snapshot) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Name)
		}
		return out
	}
	for _, tt := range []struct {
		name                string
		kept                []Snapshot
		free, size, reserve int64
		drop                []string
		err                 string
	}{
		{name: "fits", kept: kept, free: 1000 * M, size: 300 * M, reserve: 700 * M},
		{name: "the oldest makes the room", kept: kept, free: 950 * M, size: 300 * M, reserve: 700 * M, drop: []string{"a"}},
		{name: "the two oldest", kept: kept, free: 750 * M, size: 300 * M, reserve: 700 * M, drop: []string{"a", "b"}},
		{
			name: "never the newest", kept: kept, free: 600 * M, size: 300 * M, reserve: 700 * M,
			err: "600 MiB free; a snapshot of 300 MiB and a reserve of 700 MiB need 1000 MiB, and dropping every kept backup but the newest would free only 300 MiB",
		},
		{name: "nothing kept", free: 600 * M, size: 300 * M, reserve: 700 * M, err: "600 MiB free; a snapshot of 300 MiB and a reserve of 700 MiB need 1000 MiB"},
		{name: "one kept, never dropped", kept: kept[2:], free: 600 * M, size: 300 * M, reserve: 700 * M, err: "600 MiB free; a snapshot of 300 MiB and a reserve of 700 MiB need 1000 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			drop, err := Room(tt.kept, tt.free, tt.size, tt.reserve)
			if tt.err != "" {
				assert.EqualError(t, err, tt.err)
				assert.Empty(t, drop)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.drop, names(drop))
		})
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "etcd-20261206T000000Z.db")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(p+".json", []byte("{}"), 0o600))
	require.NoError(t, Remove(Snapshot{Path: p}))
	assert.NoFileExists(t, p)
	assert.NoFileExists(t, p+".json")
	assert.ErrorContains(t, Remove(Snapshot{Path: p}), "remove snapshot")
}
