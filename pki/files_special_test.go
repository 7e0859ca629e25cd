package pki

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteFileAtomicRefusesDevices: -o /dev/null is refused and /dev/null
// stays a character device.
func TestWriteFileAtomicRefusesDevices(t *testing.T) {
	err := WriteFileAtomic("/dev/null", []byte("seed"), 0o600)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
	fi, err := os.Lstat("/dev/null")
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeCharDevice, "/dev/null was replaced")
}
