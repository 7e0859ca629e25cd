package rollout

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// TestMaintainNOSPACE fills a three-member cluster with a 4 MiB quota
// until it raises NOSPACE and refuses writes, then runs Maintain: every
// key keeps the last value a write of it was acknowledged with, the
// alarm is gone, and writes are accepted again. Defrag goes one member at
// a time, the leader last.
func TestMaintainNOSPACE(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.StartArgs(t, pkiDir, []string{"--quota-backend-bytes=4194304"}, "n1", "n2", "n3")
	cli := c.Client(t)
	ctx := t.Context()

	// Overwrite eight keys until the history fills the quota: the live
	// data stays small, the old revisions do not.
	// The write that raises NOSPACE is refused with it, yet etcd applies
	// it (its quota applier checks, applies, then reports): its key may
	// hold that value instead of the last acknowledged one.
	acked := map[string][]byte{}
	var nospace error
	var refusedKey string
	var refused []byte
	for i := 0; nospace == nil; i++ {
		require.Less(t, i, 2000, "no NOSPACE after %d writes", i)
		k := fmt.Sprintf("/fill/%d", i%8)
		v := make([]byte, 64<<10)
		_, _ = rand.Read(v)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(wctx, k, string(v))
		cancel()
		switch {
		case err == nil:
			acked[k] = v
		case strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error()):
			nospace, refusedKey, refused = err, k, v
		default:
			require.NoError(t, err, "write %d", i)
		}
	}
	t.Logf("NOSPACE after %d acknowledged keys: %v", len(acked), nospace)
	m := &Maintenance{Client: cli, Endpoints: c.Endpoints(), Logf: t.Logf}
	alarms, err := m.Alarms(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, alarms)
	assert.Equal(t, "NOSPACE", alarms[0].Type)
	_, err = cli.Put(ctx, "/after", "x")
	require.ErrorContains(t, err, rpctypes.ErrNoSpace.Error(), "the alarm refuses writes")

	var lines []string
	m.Logf = func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
		t.Logf(format, args...)
	}
	require.NoError(t, m.Maintain(ctx))
	alarms, err = m.Alarms(ctx)
	require.NoError(t, err)
	assert.Empty(t, alarms, "maintain disarmed NOSPACE")
	_, err = cli.Put(ctx, "/after", "x")
	require.NoError(t, err, "writes are accepted again")
	for k, v := range acked {
		r, err := cli.Get(ctx, k)
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1, k)
		if k == refusedKey && bytes.Equal(refused, r.Kvs[0].Value) {
			continue
		}
		assert.Equal(t, v, r.Kvs[0].Value, "%s keeps its last acknowledged value", k)
	}

	// The leader was defragmented last.
	st, err := cli.Status(ctx, c.Endpoints()[0])
	require.NoError(t, err)
	var defrags []string
	for _, l := range lines {
		if name, ok := strings.CutPrefix(l, "defragmented "); ok {
			defrags = append(defrags, strings.Fields(name)[0])
		}
	}
	require.Len(t, defrags, 3, "%v", lines)
	ml, err := cli.MemberList(ctx)
	require.NoError(t, err)
	for _, mm := range ml.Members {
		if mm.ID == st.Leader {
			assert.Equal(t, mm.Name, defrags[2], "the leader goes last: %v", defrags)
		}
	}
}

// TestMaintainRefusesCORRUPT: Maintain stops at a CORRUPT alarm and
// touches nothing; Disarm clears it only when it is named.
func TestMaintainRefusesCORRUPT(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	cli := c.Client(t)
	ctx := t.Context()
	st, err := cli.Status(ctx, c.Endpoints()[0])
	require.NoError(t, err)
	_, err = pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_CORRUPT,
	})
	require.NoError(t, err)

	m := &Maintenance{Client: cli, Endpoints: c.Endpoints(), Logf: t.Logf}
	err = m.Maintain(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "CORRUPT on n1")
	done, err := m.Disarm(ctx, "nospace")
	require.NoError(t, err)
	assert.Empty(t, done, "disarming NOSPACE leaves CORRUPT")
	_, err = m.Disarm(ctx, "bogus")
	require.ErrorContains(t, err, `alarm type "bogus": want NOSPACE or CORRUPT`)
	done, err = m.Disarm(ctx, "corrupt")
	require.NoError(t, err)
	require.Len(t, done, 1)
	alarms, err := m.Alarms(ctx)
	require.NoError(t, err)
	assert.Empty(t, alarms)
}
