package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func TestPickRestoreNodes(t *testing.T) {
	res := func(name string, err error) statusResult {
		return statusResult{target: statusTarget{name: name, endpoint: "https://" + name}, status: nodeapi.Status{Name: name}, err: err}
	}
	all := []statusResult{res("n1", nil), res("n2", nil), res("n3", nil)}
	tests := []struct {
		name    string
		results []statusResult
		discard []string
		seed    string
		want    []string
		wantErr string
	}{
		{"every node, the first is the seed", all, []string{"n2", "n1", "n3"}, "", []string{"n2", "n1", "n3"}, ""},
		{"--seed", all, []string{"n1", "n2", "n3"}, "n3", []string{"n3", "n2", "n1"}, ""},
		{"a node left out", all, []string{"n1", "n2"}, "", nil, "--discard must name every node of the cluster, whose data is moved aside: n1,n2,n3 (got n1,n2)"},
		{"a stranger named", all, []string{"n1", "n2", "n3", "n4"}, "", nil, "(got n1,n2,n3,n4)"},
		{"a silent node", []statusResult{res("n1", nil), res("n2", errors.New("connection refused"))}, []string{"n1", "n2"}, "", nil, "every node must answer, to be fenced before the cluster goes back: no answer from n2 (connection refused)"},
		{"a seed outside", all, []string{"n1", "n2", "n3"}, "n9", nil, "--seed n9 is not a node of the cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := pickRestoreNodes(tt.results, tt.discard, tt.seed)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, n := range nodes {
				got = append(got, n.name)
			}
			assert.Equal(t, tt.want[0], got[0], "the seed goes first")
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}

// TestRestoreRoom: before fencing, the seed must have room for the
// snapshot twice and the others for it once, each with the WAL's room;
// nodes already in this restore, or that do not report, are not checked.
func TestRestoreRoom(t *testing.T) {
	const mib = 1 << 20
	const token = "restore-abc"
	node := func(name string, free int64) statusResult {
		st := nodeapi.Status{Name: name, Storage: nodeapi.Storage{DataBytes: 2048 * mib, DataFree: free}}
		return statusResult{target: statusTarget{name: name, endpoint: "https://" + name}, status: st}
	}
	snap := int64(200 * mib)
	// The seed needs 2*200+128 = 528 MiB, the others 328 MiB.
	assert.NoError(t, restoreRoom([]statusResult{node("n1", 528*mib), node("n2", 328*mib), node("n3", 1000*mib)}, "n1", token, snap))

	err := restoreRoom([]statusResult{node("n1", 527*mib), node("n2", 327*mib), node("n3", 1000*mib)}, "n1", token, snap)
	require.Error(t, err)
	assert.Equal(t, "not enough room on DATA for the restore, so no node was fenced: "+
		"n1 has 527 MiB free and needs about 528 MiB (the snapshot as received and as restored, and 128 MiB for etcd's WAL); "+
		"n2 has 327 MiB free and needs about 328 MiB (the new cluster's database, and 128 MiB for etcd's WAL); "+
		"grow the disks (a node grows DATA with its disk at boot) and run the same command again", err.Error())

	// The seed is whichever node the restore names.
	err = restoreRoom([]statusResult{node("n1", 400*mib), node("n2", 400*mib)}, "n2", token, snap)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "n2 has 400 MiB free and needs about 528 MiB")
	assert.NotContains(t, err.Error(), "n1 has")

	// A node of this restore already (a resume), one that does not
	// report its storage, and one that did not answer are not checked.
	resumed := node("n1", 10*mib)
	resumed.status.Recovery = nodeapi.Recovery{Op: nodeapi.OpRestore, Token: token, Phase: nodeapi.RecoverySaved}
	old := node("n2", 0)
	old.status.Storage = nodeapi.Storage{}
	silent := node("n3", 0)
	silent.err = errors.New("connection refused")
	assert.NoError(t, restoreRoom([]statusResult{resumed, old, silent}, "n1", token, snap))
	// Another restore's record does not count as this one's.
	resumed.status.Recovery.Token = "restore-def"
	assert.ErrorContains(t, restoreRoom([]statusResult{resumed}, "n1", token, snap), "n1 has 10 MiB free")
}
