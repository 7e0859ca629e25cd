package backup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaveKeepsTheNewest: the newest keep snapshots stay, whole, and a
// crash's temporary file goes.
func TestSaveKeepsTheNewest(t *testing.T) {
	const keep = 3
	dir := filepath.Join(t.TempDir(), "backups")
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var last Snapshot
	for i := range keep + 3 {
		var err error
		last, err = Save(dir, strings.NewReader(fmt.Sprint("snapshot ", i)), int64(i), start.Add(time.Duration(i)*time.Second), keep)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd-crashed.db.tmp"), nil, 0o600))
	require.NoError(t, Prune(dir, keep))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Len(t, names, keep, "files %v", names)
	assert.Equal(t, filepath.Base(last.Path), names[len(names)-1])
	b, err := os.ReadFile(last.Path)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint("snapshot ", keep+2), string(b))
	assert.Equal(t, int64(len(b)), last.Size)
	assert.Equal(t, int64(keep+2), last.Revision)
	assert.Equal(t, "etcd-20300102T030410.000000000Z.db", filepath.Base(last.Path))
}
