package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSeedSizeCap: a seed over 1 MiB is refused at once, unparsed, and the
// error does not echo it.
func TestSeedSizeCap(t *testing.T) {
	huge := "cluster: x\nname: " + strings.Repeat("a", MaxSeedSize) + "\n"
	start := time.Now()
	_, err := ParseSeed([]byte(huge))
	require.ErrorIs(t, err, ErrSeedTooLarge)
	assert.Less(t, len(err.Error()), 200, "the error echoes the seed")
	assert.Less(t, time.Since(start), time.Second, "a huge seed was parsed before it was refused")

	dir := t.TempDir()
	path := filepath.Join(dir, "user-data")
	require.NoError(t, os.WriteFile(path, []byte(huge), 0o600))
	_, err = ReadSeedFile(path)
	require.ErrorIs(t, err, ErrSeedTooLarge)
	assert.Contains(t, err.Error(), path)

	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, []byte("cluster: x\n"), 0o600))
	b, err := ReadSeedFile(ok)
	require.NoError(t, err)
	assert.Equal(t, "cluster: x\n", string(b))
	_, err = ReadSeedFile(filepath.Join(dir, "missing"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a missing file is ErrNotExist: %v", err)
}
