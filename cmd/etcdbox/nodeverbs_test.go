package main

import (
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// logNode is a node API backend with a log that records reboots.
type logNode struct {
	statusNode
	logs       []string
	mu         sync.Mutex
	reboots    int
	lastReboot nodeapi.RebootRequest
}

func (n *logNode) Logs(lines int) []string {
	if len(n.logs) > lines {
		return n.logs[len(n.logs)-lines:]
	}
	return n.logs
}

func (n *logNode) Reboot(req nodeapi.RebootRequest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reboots++
	n.lastReboot = req
	return nil
}

// TestLogsAndReboot runs logs and reboot against node APIs found by
// name, through --endpoints.
func TestLogsAndReboot(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	n1 := &logNode{statusNode: statusNode{status: nodeapi.Status{Name: "n1"}}, logs: []string{"etcdbox: one", "etcd: two", "etcdbox: three"}}
	n2 := &logNode{statusNode: statusNode{status: nodeapi.Status{Name: "n2"}}, logs: []string{"n2 only"}}
	eps := "https://127.0.0.1:" + strconv.Itoa(serveNode(t, adminDir, "n1", n1)) + ",https://127.0.0.1:" + strconv.Itoa(serveNode(t, adminDir, "n2", n2))

	out, _, code, err := runExit(t, "logs", "n1", "--endpoints", eps, "--pki", adminDir, "--lines", "2")
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "etcd: two\netcdbox: three\n", out, "the last two lines of n1, oldest first")

	out, _, _, err = runExit(t, "reboot", "n2", "--endpoints", eps, "--pki", adminDir)
	require.NoError(t, err)
	assert.Equal(t, "n2: rebooting\n", out)
	assert.Equal(t, 1, n2.reboots)
	assert.Zero(t, n1.reboots, "only the named node reboots")
	assert.False(t, n2.lastReboot.NoKexec, "kexec where the node can, by default")
	_, _, _, err = runExit(t, "reboot", "n2", "--endpoints", eps, "--pki", adminDir, "--no-kexec")
	require.NoError(t, err)
	assert.Equal(t, 2, n2.reboots)
	assert.True(t, n2.lastReboot.NoKexec, "--no-kexec reaches the node")

	_, _, code, err = runExit(t, "reboot", "n9", "--endpoints", eps, "--pki", adminDir)
	assert.Equal(t, exitError, code)
	assert.ErrorContains(t, err, "no endpoint answers as node n9; they are n1 at")
	_, _, code, err = runExit(t, "logs", "n1", "--endpoints", eps, "--pki", adminDir, "--lines", "0")
	assert.Equal(t, exitUsage, code)
	assert.ErrorContains(t, err, "--lines 0: want 1 to")
	_, _, code, _ = runExit(t, "logs", "--endpoints", eps, "--pki", adminDir)
	assert.Equal(t, exitUsage, code, "NODE is required")
}
