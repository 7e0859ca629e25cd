package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackendQuota(t *testing.T) {
	const gib, mib = int64(1) << 30, int64(1) << 20
	tests := []struct {
		name                 string
		seed, data, db, want int64
		why                  string
	}{
		{"a share of a small DATA", 0, 10 * gib, 0, 4 * gib, "40% of DATA (10.0 GiB)"},
		{"at most etcd's suggested maximum", 0, 100 * gib, 0, 8 << 30, "etcd's suggested maximum"},
		{"a tiny DATA", 0, 500 * mib, 10 * mib, 200 * mib, "40% of DATA (500 MiB)"},
		{"never below the database a restart finds", 0, 1 * gib, 800 * mib, 1000 * mib, "1.25 times the database (800 MiB)"},
		{"the seed wins", 2 * gib, 100 * gib, 0, 2 * gib, "from the seed"},
		{"the seed, with a warning", 6 * gib, 10 * gib, 0, 6 * gib, "over half of DATA"},
		{"unknown DATA leaves etcd's default", 0, 0, 0, 0, "etcd's default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := backendQuota(tt.seed, tt.data, tt.db)
			assert.Equal(t, tt.want, got)
			assert.Contains(t, why, tt.why)
		})
	}
}

func TestDataSizes(t *testing.T) {
	root := t.TempDir()
	dataDir := filepath.Join(root, "etcd")
	data, db, err := dataSizes(root, dataDir)
	require.NoError(t, err)
	assert.Positive(t, data)
	assert.Zero(t, db, "no database yet")
	require.NoError(t, os.MkdirAll(filepath.Join(dataDir, "member", "snap"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "member", "snap", "db"), make([]byte, 4096), 0o600))
	_, db, err = dataSizes(root, dataDir)
	require.NoError(t, err)
	assert.Equal(t, int64(4096), db)
	_, _, err = dataSizes(filepath.Join(root, "nonesuch"), dataDir)
	assert.ErrorContains(t, err, "statfs")
}
