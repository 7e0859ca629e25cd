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
