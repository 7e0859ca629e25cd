package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// decommissionNode answers status and decommission requests.
type decommissionNode struct {
	statusNode
	err  error
	mu   sync.Mutex
	reqs []nodeapi.DecommissionRequest
}

func (n *decommissionNode) Decommission(_ context.Context, req nodeapi.DecommissionRequest) (nodeapi.Decommissioned, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reqs = append(n.reqs, req)
	if n.err != nil {
		return nodeapi.Decommissioned{}, n.err
	}
	return nodeapi.Decommissioned{Node: req.Node, MemberID: "abc", Reason: req.Reason, Tombstone: "/var/lib/etcdbox/state/decommissioned",
		At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
}

func TestDecommissionCommand(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	n1 := &decommissionNode{statusNode: statusNode{status: nodeapi.Status{Name: "n1"}}}
	n2 := &decommissionNode{statusNode: statusNode{status: nodeapi.Status{Name: "n2"}},
		err: fmt.Errorf("remove n2: %w: removing n2 would leave 1 healthy of 2 voters, below their quorum of 2", server.ErrRefused)}
	p1, p2 := serveNode(t, adminDir, "n1", n1), serveNode(t, adminDir, "n2", n2)
	url := func(port int) string { return "https://127.0.0.1:" + strconv.Itoa(port) }
	eps := url(p1) + "," + url(p2)

	t.Run("endpoints", func(t *testing.T) {
		out, err := runCLI(t, "decommission", "n1", "--endpoints", eps, "--pki", adminDir, "--reason", "scale 5 -> 3")
		require.NoError(t, err)
		assert.Equal(t, "n1: member abc removed at 2030-01-02T03:04:05Z; tombstone /var/lib/etcdbox/state/decommissioned; the node powers off\n", out)
		assert.Equal(t, []nodeapi.DecommissionRequest{{Node: "n1", Reason: "scale 5 -> 3"}}, n1.reqs)
		assert.Empty(t, n2.reqs, "only the named node is asked")
	})

	t.Run("refused", func(t *testing.T) {
		_, err := runCLI(t, "decommission", "n2", "--endpoints", eps, "--pki", adminDir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "decommission n2: POST "+url(p2)+"/v1/decommission: 409 Conflict: decommission: remove n2: refused: removing n2 would leave 1 healthy of 2 voters")
		require.Len(t, n2.reqs, 1)
		assert.Contains(t, n2.reqs[0].Reason, "etcdbox decommission by ", "a default reason")
	})

	t.Run("unknown node", func(t *testing.T) {
		_, err := runCLI(t, "decommission", "n9", "--endpoints", eps, "--pki", adminDir)
		assert.EqualError(t, err, "no endpoint answers as node n9; they are n1 at "+url(p1)+", n2 at "+url(p2))
	})

	t.Run("cluster dir", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(filepath.Join(dir, cluster.PKIDir), os.DirFS(adminDir)))
		require.NoError(t, cluster.WriteState(dir, cluster.State{Nodes: []cluster.Node{{Name: "n1", APIPort: p1}, {Name: "n2", APIPort: p2}}}))
		_, err := runCLI(t, "decommission", "n3", "--dir", dir)
		assert.EqualError(t, err, "no node n3 in the cluster; its nodes are n1, n2")
		_, err = runCLI(t, "decommission", "n1", "--dir", dir)
		require.NoError(t, err)
		assert.Len(t, n1.reqs, 2)
	})

	t.Run("flags", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"decommission", "--dir", "d"}, "accepts 1 arg(s), received 0"},
			{[]string{"decommission", "n1"}, "at least one of the flags in the group [endpoints dir] is required"},
			{[]string{"decommission", "n1", "--endpoints", "a"}, "--pki is required with --endpoints"},
		} {
			_, err := runCLI(t, tc.args...)
			assert.ErrorContains(t, err, tc.want)
		}
	})
}
