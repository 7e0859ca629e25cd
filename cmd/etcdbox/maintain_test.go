package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// TestMaintenanceVerbs drives alarm list and disarm, defrag and maintain
// against two bin/etcd members on loopback (the NOSPACE recovery itself
// is rollout's TestMaintainNOSPACE).
func TestMaintenanceVerbs(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1", "n2")
	target := []string{"--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--pki", pkiDir}
	run := func(args ...string) (string, error) { return runCLI(t, append(args, target...)...) }

	out, err := run("alarm", "list")
	require.NoError(t, err)
	assert.Equal(t, "no alarm is raised\n", out)

	cli := c.Client(t)
	st, err := cli.Status(t.Context(), c.Member(t, "n2").ClientURL)
	require.NoError(t, err)
	_, err = pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(t.Context(), &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE,
	})
	require.NoError(t, err)
	out, err = run("alarm", "list", "-o", "json")
	require.NoError(t, err)
	var rows []alarmJSON
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, alarmJSON{Type: "NOSPACE", Member: "n2", ID: rows[0].ID}, rows[0])

	out, err = run("defrag")
	require.NoError(t, err, out)
	assert.Equal(t, 2, strings.Count(out, "defragmented "), out)

	out, err = run("maintain")
	require.NoError(t, err, out)
	assert.Contains(t, out, "disarmed NOSPACE on n2")
	out, err = run("alarm", "disarm")
	require.NoError(t, err)
	assert.Equal(t, "no NOSPACE alarm was raised\n", out)
	_, err = run("alarm", "disarm", "--type", "fire")
	require.ErrorContains(t, err, `alarm type "fire": want NOSPACE or CORRUPT`)
}
