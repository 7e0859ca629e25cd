package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// TestEnvironment: ETCDBOX_ENDPOINTS, ETCDBOX_PKI and ETCDBOX_DIR stand
// in for the flags, which win; both targets at once is a usage error.
func TestEnvironment(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	st := nodeapi.Status{Name: "n1", Version: "v2", Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}}
	url := "https://127.0.0.1:" + strconv.Itoa(serveStatusNode(t, adminDir, st))
	empty := t.TempDir()

	t.Run("endpoints and pki", func(t *testing.T) {
		t.Setenv(envEndpoints, url)
		t.Setenv(envPKI, adminDir)
		out, _, code, err := runExit(t, "status")
		require.NoError(t, err)
		assert.Zero(t, code)
		assert.Equal(t, "n1", rowOf(t, out, "n1")[0])
	})
	t.Run("dir", func(t *testing.T) {
		t.Setenv(envDir, empty)
		_, _, code, err := runExit(t, "status")
		assert.Equal(t, exitError, code, "the variable satisfied the flag group; the directory is the runtime error")
		assert.ErrorContains(t, err, "state.json is missing")
	})
	t.Run("a flag wins", func(t *testing.T) {
		t.Setenv(envDir, empty)
		t.Setenv(envPKI, empty)
		out, _, code, err := runExit(t, "status", "--endpoints", url, "--pki", adminDir)
		require.NoError(t, err, "neither ETCDBOX_DIR nor ETCDBOX_PKI applies")
		assert.Zero(t, code)
		assert.Equal(t, "n1", rowOf(t, out, "n1")[0])
	})
	t.Run("both targets", func(t *testing.T) {
		t.Setenv(envDir, empty)
		t.Setenv(envEndpoints, url)
		_, _, code, err := runExit(t, "status")
		assert.Equal(t, exitUsage, code)
		assert.ErrorContains(t, err, "ETCDBOX_ENDPOINTS and ETCDBOX_DIR are both set")
	})
	t.Run("pki init's --dir is not a cluster", func(t *testing.T) {
		t.Setenv(envDir, empty)
		_, _, code, err := runExit(t, "pki", "init")
		assert.Equal(t, exitUsage, code)
		assert.ErrorContains(t, err, `required flag(s) "dir" not set`)
	})
}
