package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func TestRecoverRequest(t *testing.T) {
	lost := nodeapi.Status{Name: "n3", Member: nodeapi.Member{ID: "b", ClusterID: "a", Role: nodeapi.RoleVoter}, Quorum: nodeapi.Quorum{Lost: true, Since: time.Unix(1, 0)}}
	res := func(name string, st nodeapi.Status, err error) statusResult {
		return statusResult{target: statusTarget{name: name, endpoint: "https://" + name}, status: st, err: err}
	}
	down := errors.New("connection refused")
	healthy := nodeapi.Status{Name: "n1", Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}}
	done := lost
	done.Quorum = nodeapi.Quorum{}
	done.Recovery = nodeapi.Recovery{Token: "recover-a-b", Phase: nodeapi.RecoveryDone}
	interrupted := lost
	interrupted.Recovery = nodeapi.Recovery{Token: "recover-a-b", Phase: nodeapi.RecoverySaved}
	noIdentity := lost
	noIdentity.Member = nodeapi.Member{}
	tests := []struct {
		name    string
		results []statusResult
		token   string
		wantErr string
	}{
		{"quorum lost, the others silent", []statusResult{res("n1", nodeapi.Status{}, down), res("n3", lost, nil)}, "recover-a-b", ""},
		{"the others answer without data", []statusResult{res("n1", nodeapi.Status{Name: "n1"}, nil), res("n3", lost, nil)}, "recover-a-b", ""},
		{"survivor silent", []statusResult{res("n3", nodeapi.Status{}, down)}, "", "survivor n3 does not answer"},
		{"no such node", []statusResult{res("n1", healthy, nil)}, "", "no node n3 answers"},
		{"survivor keeps its quorum", []statusResult{res("n3", func() nodeapi.Status { s := healthy; s.Name = "n3"; return s }(), nil)}, "", "refused: n3 has not lost its quorum"},
		{"a healthy voter elsewhere", []statusResult{res("n1", healthy, nil), res("n3", lost, nil)}, "", "refused: n1 is a healthy voter"},
		{"survivor never served", []statusResult{res("n3", noIdentity, nil)}, "", "does not know its cluster and member IDs"},
		{"done: the recorded token, for the node to say so", []statusResult{res("n3", done, nil)}, "recover-a-b", ""},
		{"interrupted: resumed with its token", []statusResult{res("n3", interrupted, nil)}, "recover-a-b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			endpoint, req, err := recoverRequest("n3", tt.results)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "https://n3", endpoint)
			assert.Equal(t, nodeapi.RecoverRequest{Survivor: "n3", Token: tt.token}, req)
		})
	}
}
