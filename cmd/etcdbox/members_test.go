package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

func TestMembersFlags(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no cluster named", []string{"members", "list"}, "at least one of the flags in the group [endpoints etcd-endpoints dir] is required"},
		{"endpoints and dir", []string{"members", "list", "--endpoints", "a", "--dir", "d"}, "none of the others can be"},
		{"no pki", []string{"members", "list", "--endpoints", "a"}, "--pki is required with --endpoints, or --cacert, --cert and --key"},
		{"bad etcd endpoint", []string{"members", "list", "--etcd-endpoints", "http://a:2379", "--pki", pkiDir}, `etcd endpoint "http://a:2379": want https://host:port`},
		{"bad output", []string{"members", "list", "--etcd-endpoints", "https://a:2379", "--pki", pkiDir, "-o", "xml"}, `-o "xml": want one of table, json, yaml`},
		{"no cluster dir", []string{"members", "list", "--dir", t.TempDir()}, "use --endpoints"},
		{"remove without node", []string{"members", "remove", "--dir", "d"}, "accepts 1 arg(s), received 0"},
		{"no such pki", []string{"members", "remove", "n1", "--endpoints", "a", "--pki", t.TempDir()}, "load admin certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(t, tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestMembersRealEtcd drives members list and remove against three
// bin/etcd members on loopback, reached as a local cluster directory.
func TestMembersRealEtcd(t *testing.T) {
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, cluster.PKIDir)
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1", "n2", "n3")
	var nodes []cluster.Node
	for _, m := range c.Members {
		u, err := url.Parse(m.ClientURL)
		require.NoError(t, err)
		port, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		nodes = append(nodes, cluster.Node{Name: m.Name, ClientPort: port})
	}
	require.NoError(t, cluster.WriteState(dir, cluster.State{Nodes: nodes}))

	t.Run("list", func(t *testing.T) {
		out, err := runCLI(t, "members", "list", "--dir", dir)
		require.NoError(t, err)
		t.Log("\n" + out)
		assert.Regexp(t, `^ID +NAME +PEER URLS +CLIENT URLS +ROLE +STARTED +LEADER +HEALTH\n`, out)
		for _, name := range []string{"n1", "n2", "n3"} {
			row := rowOf(t, out, rowID(t, out, name))
			assert.Equal(t, []string{name, c.Member(t, name).PeerURL, c.Member(t, name).ClientURL, "voter", "yes"}, row[1:6])
			assert.Equal(t, "healthy", row[7])
		}
		out, err = runCLI(t, "members", "list", "--etcd-endpoints", c.Member(t, "n2").ClientURL, "--pki", pkiDir, "-o", "json")
		require.NoError(t, err)
		var rows []memberRow
		require.NoError(t, json.Unmarshal([]byte(out), &rows))
		require.Len(t, rows, 3)
		leaders := 0
		for _, r := range rows {
			assert.True(t, r.Healthy && r.Started && !r.Learner, "%+v", r)
			assert.Equal(t, []string{c.Member(t, r.Name).ClientURL}, r.ClientURLs)
			if r.Leader {
				leaders++
			}
		}
		assert.Equal(t, 1, leaders)
	})

	t.Run("refused while the lock is held", func(t *testing.T) {
		cli := c.Client(t)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		require.NoError(t, err)
		defer s.Close()
		m := concurrency.NewMutex(s, rollout.MembershipLockKey)
		require.NoError(t, m.Lock(t.Context()))
		defer m.Unlock(context.Background())
		_, err = runCLI(t, "members", "remove", "n3", "--dir", dir)
		require.ErrorIs(t, err, rollout.ErrMembershipLocked)
		assert.Contains(t, err.Error(), "remove n3: another membership change is under way: the membership lock /etcdbox/membership is held")
	})

	t.Run("refused: not a member", func(t *testing.T) {
		_, err := runCLI(t, "members", "remove", "n9", "--dir", dir)
		require.ErrorIs(t, err, rollout.ErrRemoveRefused)
		assert.Contains(t, err.Error(), "n9 is not a member; the members are n1, n2, n3")
	})

	t.Run("refused: quorum", func(t *testing.T) {
		c.Kill("n3")
		_, err := runCLI(t, "members", "remove", "n1", "--dir", dir)
		require.ErrorIs(t, err, rollout.ErrRemoveRefused)
		assert.Contains(t, err.Error(), "removing n1 would leave 1 healthy of 2 voters, below their quorum of 2")
		out, err := runCLI(t, "members", "list", "--dir", dir)
		require.NoError(t, err)
		assert.Contains(t, rowOf(t, out, rowID(t, out, "n3")), "unhealthy:")
	})

	t.Run("remove", func(t *testing.T) {
		out, err := runCLI(t, "members", "remove", "n3", "--dir", dir)
		require.NoError(t, err)
		assert.Contains(t, out, "removed member n3 (")
		out, err = runCLI(t, "members", "list", "--dir", dir)
		require.NoError(t, err)
		assert.NotContains(t, out, "n3")
		assert.Len(t, bytes.Split(bytes.TrimSpace([]byte(out)), []byte("\n")), 3, "a header and two members:\n%s", out)
	})
}

// rowID returns the ID column of the row that names member name.
func rowID(t *testing.T, table, name string) string {
	t.Helper()
	for _, line := range bytes.Split([]byte(table), []byte("\n")) {
		if f := bytes.Fields(line); len(f) > 1 && string(f[1]) == name {
			return string(f[0])
		}
	}
	require.Failf(t, "no row", "no row for %s in:\n%s", name, table)
	return ""
}
