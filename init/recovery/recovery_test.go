package recovery

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func TestCheck(t *testing.T) {
	want := nodeapi.RecoveryToken("c0ffee", "beef")
	done := nodeapi.Recovery{Token: want, Phase: nodeapi.RecoveryDone, From: "c0ffee", To: "abc", Updated: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	tests := []struct {
		name    string
		rec     nodeapi.Recovery
		req     nodeapi.RecoverRequest
		want    string
		dec     Decision
		msg     string
		wantErr string
	}{
		{"a new recovery", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n1", Token: want}, want, Start, "", ""},
		{"another node's name", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n2", Token: want}, want, 0, "", "refused: this node is n1, not n2"},
		{"a token of another cluster", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n1", Token: "recover-1-2"}, want, 0, "", "refused: token recover-1-2 is not this node's"},
		{"a node that never served", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n1", Token: want}, "", 0, "", "refused: this node does not know its cluster and member IDs"},
		{"interrupted: resumed", nodeapi.Recovery{Token: want, Phase: nodeapi.RecoverySaved}, nodeapi.RecoverRequest{Survivor: "n1", Token: want}, "", Resume, "resuming recovery " + want + " from phase saved", ""},
		{"interrupted, another token", nodeapi.Recovery{Token: "recover-1-2", Phase: nodeapi.RecoveryFenced}, nodeapi.RecoverRequest{Survivor: "n1", Token: want}, want, 0, "", "refused: recovery recover-1-2 is under way (phase fenced)"},
		// The node now runs the new cluster: its token is another, and
		// the replayed one is the done record's.
		{"a replay once done", done, nodeapi.RecoverRequest{Survivor: "n1", Token: want}, nodeapi.RecoveryToken("abc", "1"), NoOp, "recovery " + want + " was done on 2030-01-02T03:04:05Z: cluster c0ffee became cluster abc; nothing to do", ""},
		{"a new loss after a recovery", done, nodeapi.RecoverRequest{Survivor: "n1", Token: nodeapi.RecoveryToken("abc", "1")}, nodeapi.RecoveryToken("abc", "1"), Start, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, msg, err := Check(tt.rec, tt.req, "n1", tt.want)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.True(t, errors.Is(err, ErrRefused))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.dec, dec)
			assert.Equal(t, tt.msg, msg)
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "recovery.json")
	r, err := Load(path)
	require.NoError(t, err)
	assert.Zero(t, r, "no record: the zero recovery")
	assert.False(t, Fenced(r))
	in := nodeapi.Recovery{Token: "recover-a-b", Phase: nodeapi.RecoverySaved, From: "a", Snapshot: "/x.db", Revision: 7, Bump: DefaultBump,
		Started: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), NoOp: true, Message: "not kept"}
	require.NoError(t, Save(path, in))
	got, err := Load(path)
	require.NoError(t, err)
	in.NoOp, in.Message = false, ""
	assert.Equal(t, in, got)
	assert.True(t, Fenced(got))
	assert.True(t, Reached(got, nodeapi.RecoveryFenced))
	assert.False(t, Reached(got, nodeapi.RecoveryRestored))

	require.NoError(t, Save(path, nodeapi.Recovery{Phase: "sideways"}))
	_, err = Load(path)
	assert.ErrorContains(t, err, `unknown phase "sideways"`)
}

func TestCheckRestore(t *testing.T) {
	tok := nodeapi.RestoreToken(strings.Repeat("ab", 32))
	other := nodeapi.RestoreToken(strings.Repeat("cd", 32))
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		rec     nodeapi.Recovery
		req     nodeapi.RestoreRequest
		dec     Decision
		wantErr string
	}{
		{"fence starts a restore", nodeapi.Recovery{}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, Start, ""},
		{"fence after an old restore is done", nodeapi.Recovery{Token: other, Phase: nodeapi.RecoveryDone}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, Start, ""},
		{"seed without the fence", nodeapi.Recovery{}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreSeed}, 0, "has not fenced this node"},
		{"rejoin without the fence", nodeapi.Recovery{}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreRejoin}, 0, "has not fenced this node"},
		{"fenced: seed goes on", nodeapi.Recovery{Op: nodeapi.OpRestore, Token: tok, Phase: nodeapi.RecoverySaved}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreSeed}, Resume, ""},
		{"fence again: goes on, changes nothing", nodeapi.Recovery{Op: nodeapi.OpRestore, Token: tok, Phase: nodeapi.RecoveryFenced}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, Resume, ""},
		{"a seed asked to rejoin", nodeapi.Recovery{Op: nodeapi.OpRestore, Role: nodeapi.RestoreSeed, Token: tok, Phase: nodeapi.RecoveryRestored}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreRejoin}, 0, "takes restore restore-abababababababab... as seed, not rejoin"},
		{"done: a no-op", nodeapi.Recovery{Op: nodeapi.OpRestore, Token: tok, Phase: nodeapi.RecoveryDone, From: "a", To: "b", Updated: at}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, NoOp, ""},
		{"another restore under way", nodeapi.Recovery{Op: nodeapi.OpRestore, Token: other, Phase: nodeapi.RecoveryFenced}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, 0, "restore restore-cdcdcdcdcdcdcdcd... is under way (phase fenced)"},
		{"a recovery under way", nodeapi.Recovery{Token: "recover-a-b", Phase: nodeapi.RecoverySaved}, nodeapi.RestoreRequest{Token: tok, Step: nodeapi.RestoreFence}, 0, "recover recover-a-b is under way (phase saved)"},
		{"unknown step", nodeapi.Recovery{}, nodeapi.RestoreRequest{Token: tok, Step: "wipe"}, 0, `unknown restore step "wipe"`},
		{"not a restore token", nodeapi.Recovery{}, nodeapi.RestoreRequest{Token: "recover-a-b", Step: nodeapi.RestoreFence}, 0, "is not a restore token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, msg, err := CheckRestore(tt.rec, tt.req)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.ErrorIs(t, err, ErrRefused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.dec, dec)
			if dec == NoOp {
				assert.Contains(t, msg, "was done on 2030-01-02T03:04:05Z: cluster a became cluster b; nothing to do")
			}
		})
	}
}

func TestCheckRejoin(t *testing.T) {
	tok := nodeapi.RecoveryToken("c0ffee", "beef")
	req := nodeapi.RecoverRequest{Survivor: "n3", Token: tok, Rejoin: true}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		rec     nodeapi.Recovery
		req     nodeapi.RecoverRequest
		cluster string
		dec     Decision
		msg     string
		wantErr string
	}{
		{"a member of the recovered cluster", nodeapi.Recovery{}, req, "c0ffee", Start, "", ""},
		{"a member of the new cluster", nodeapi.Recovery{}, req, "abc", NoOp, "this node's member is of cluster abc, not of cluster c0ffee that recovery " + tok + " replaced; nothing to do", ""},
		{"no member data", nodeapi.Recovery{}, req, "", NoOp, "this node holds no member of a known cluster: it joins the new cluster by itself", ""},
		{"the survivor", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n1", Token: tok, Rejoin: true}, "c0ffee", 0, "", "this node is the survivor"},
		{"not a recovery token", nodeapi.Recovery{}, nodeapi.RecoverRequest{Survivor: "n3", Token: "restore-x", Rejoin: true}, "c0ffee", 0, "", "is not a recovery token"},
		{"interrupted: resumed", nodeapi.Recovery{Token: tok, Role: nodeapi.RestoreRejoin, Phase: nodeapi.RecoveryFenced}, req, "c0ffee", Resume, "resuming the rejoin after recovery " + tok + " from phase fenced", ""},
		{"done: a no-op", nodeapi.Recovery{Token: tok, Role: nodeapi.RestoreRejoin, Phase: nodeapi.RecoveryDone, Updated: at}, req, "abc", NoOp, "this node rejoined after recovery " + tok + " on 2030-01-02T03:04:05Z; nothing to do", ""},
		{"a restore under way", nodeapi.Recovery{Op: nodeapi.OpRestore, Token: "restore-ab", Phase: nodeapi.RecoveryFenced}, req, "c0ffee", 0, "", "restore restore-ab is under way"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, msg, err := CheckRejoin(tt.rec, tt.req, "n1", tt.cluster)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.ErrorIs(t, err, ErrRefused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.dec, dec)
			assert.Equal(t, tt.msg, msg)
		})
	}
	c, ok := TokenCluster(tok)
	assert.True(t, ok)
	assert.Equal(t, "c0ffee", c)
}
