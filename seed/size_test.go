package seed

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
	huge := "cluster: x\nname: " + strings.Repeat("a", MaxSize) + "\n"
	start := time.Now()
	_, err := Parse([]byte(huge))
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Less(t, len(err.Error()), 200, "the error echoes the seed")
	assert.Less(t, time.Since(start), time.Second, "a huge seed was parsed before it was refused")

	dir := t.TempDir()
	path := filepath.Join(dir, "user-data")
	require.NoError(t, os.WriteFile(path, []byte(huge), 0o600))
	_, err = ReadFile(path)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), path)

	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, []byte("cluster: x\n"), 0o600))
	b, err := ReadFile(ok)
	require.NoError(t, err)
	assert.Equal(t, "cluster: x\n", string(b))
	_, err = ReadFile(filepath.Join(dir, "missing"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a missing file is ErrNotExist: %v", err)
}

// TestSeedErrorsDoNotEcho: a seed error names the key and the problem, but
// repeats no PEM text (a CA key under the wrong key) and at most the start
// of a long value.
func TestSeedErrorsDoNotEcho(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMARKERsecretMARKER\n-----END PRIVATE KEY-----\n"
	seed := "cluster: demo\nname: |\n  " + strings.ReplaceAll(key, "\n", "\n  ") + "\nupgrade:\n  insecureRegistries: [" + strings.Repeat("x", 5000) + "]\n"
	_, err := Parse([]byte(seed))
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "MARKER", "the error echoes PEM text")
	assert.Contains(t, msg, "name:")
	assert.Contains(t, msg, "PEM text of")
	assert.Contains(t, msg, "upgrade.insecureRegistries[0]")
	assert.Contains(t, msg, "(5000 bytes)")
	assert.Less(t, len(msg), 600, "the error repeats long values: %s", msg)
}

func TestVerbs(t *testing.T) {
	assert.Equal(t, "qs", string(verbs("%q: %s")))
	assert.Equal(t, "dq", string(verbs("100%% of %5d, %-8q")))
	assert.Empty(t, verbs("no verbs, 100%%"))
}
