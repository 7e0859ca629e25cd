package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteSysctls(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "net/ipv4"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "net/ipv4/tcp_retries2"), []byte("15\n"), 0o644))
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }

	require.NoError(t, writeSysctls(root, sysctls, logf))
	b, err := os.ReadFile(filepath.Join(root, "net/ipv4/tcp_retries2"))
	require.NoError(t, err)
	assert.Equal(t, "5", string(b))
	assert.Equal(t, []string{"sysctl net.ipv4.tcp_retries2=5: notice a dead etcd peer in about 13 s, not 165 s"}, lines)

	// A key the kernel lacks is named in the error; the others are
	// still written.
	lines = nil
	set := []sysctl{{key: "net/ipv9/nonesuch", value: "1", why: "x"}, sysctls[0]}
	err = writeSysctls(root, set, logf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sysctl net.ipv9.nonesuch=1")
	assert.Len(t, lines, 1, "the good setting is still written and logged")
}

// TestSysctlsExist checks every setting against this machine's kernel:
// a key that no Linux has would fail on every node.
func TestSysctlsExist(t *testing.T) {
	for _, s := range sysctls {
		_, err := os.Stat(filepath.Join("/proc/sys", s.key))
		assert.NoError(t, err, "%s", s.key)
	}
}
