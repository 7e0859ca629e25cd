package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// statusNode is a node API backend that only reports.
type statusNode struct {
	server.Node // nil: any other method panics
	status      nodeapi.Status
}

func (n statusNode) Status(context.Context) (nodeapi.Status, error) { return n.status, nil }
func (n statusNode) Upgrade() nodeapi.UpgradeProgress               { return n.status.Upgrade }

// serveStatusNode serves st with a server certificate from the CA in
// adminDir and returns the port.
func serveStatusNode(t *testing.T, adminDir string, st nodeapi.Status) int {
	t.Helper()
	return serveNode(t, adminDir, st.Name, statusNode{status: st})
}

// serveNode serves node as name with a server certificate from the CA in
// adminDir and returns the port.
func serveNode(t *testing.T, adminDir, name string, node server.Node) int {
	t.Helper()
	_, addr := serveAt(t, adminDir, name, "127.0.0.1:0", node)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return p
}

// serveAt serves node's API as name on addr ("127.0.0.1:0" for any
// port) with a certificate from the CA in adminDir, and returns the
// server and the address it listens on.
func serveAt(t *testing.T, adminDir, name, addr string, node server.Node) (*server.Server, string) {
	t.Helper()
	ca, err := pki.LoadCAFiles(adminDir)
	require.NoError(t, err)
	dns, ips := pki.NodeSANs(name, nil, nil)
	cert, key, err := ca.Issue(pki.Leaf{CommonName: name, DNSNames: dns, IPs: ips, Server: true, Client: true})
	require.NoError(t, err)
	nodeDir := t.TempDir()
	for name, data := range map[string][]byte{server.CACertFile: ca.CertPEM(), server.ServerCertFile: cert, server.ServerKeyFile: key} {
		require.NoError(t, os.WriteFile(filepath.Join(nodeDir, name), data, 0o600))
	}
	srv, err := server.New(server.Config{PKIDir: nodeDir, Node: node})
	require.NoError(t, err)
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return srv, l.Addr().String()
}

// downPort returns a loopback port nothing listens on.
func downPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func runStatusCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run(ctx, append([]string{"status"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

// rowOf returns the fields of the table row whose first column is node.
func rowOf(t *testing.T, table, node string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == node {
			return f
		}
	}
	require.Failf(t, "no row", "no row for %s in:\n%s", node, table)
	return nil
}

func TestStatusCommand(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	n1 := nodeapi.Status{
		Name: "n1", Version: "v2", EtcdVersion: "3.7.3", Slot: "b", Blessed: true,
		Member:     nodeapi.Member{ID: "8e9e05c52164694d", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
		CertExpiry: time.Now().Add(60*24*time.Hour + time.Hour),
		Uptime:     26*time.Hour + 3*time.Minute, Kernel: "6.1.0-57-amd64",
		Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
	}
	n2 := nodeapi.Status{
		Name: "n2", Version: "v1", EtcdVersion: "3.7.3", Slot: "a", Blessed: false,
		Member:       nodeapi.Member{Role: nodeapi.RoleLearner, Healthy: false},
		CertExpiry:   time.Now().Add(3*24*time.Hour + time.Hour),
		Upgrade:      nodeapi.UpgradeProgress{Target: "registry.example/etcdbox@sha256:00", Phase: nodeapi.PhaseFailed, Error: "pull: 404"},
		LastRollback: "slot b: gate failed: not a voting member after 120s",
	}
	up1 := serveStatusNode(t, adminDir, n1)
	up2 := serveStatusNode(t, adminDir, n2)
	down := downPort(t)
	url := func(port int) string { return "https://127.0.0.1:" + strconv.Itoa(port) }

	t.Run("endpoints, one down", func(t *testing.T) {
		out, _, err := runStatusCLI(t, "--endpoints", url(up1)+","+url(down), "--pki", adminDir)
		t.Log("\n" + out)
		require.Error(t, err, "an unreachable node makes the exit status non-zero")
		assert.Contains(t, err.Error(), "1 of 2 nodes did not answer: "+url(down))
		assert.Regexp(t, `^NODE +VERSION +ETCD +SLOT +BLESSED +ROLE +LEADER +HEALTH +DB/QUOTA +DATA FREE +UPTIME +KERNEL +CERT EXPIRY\n`, out)
		assert.Equal(t, []string{"n1", "v2", "3.7.3", "b", "yes", "voter", "yes", "healthy", "-", "-", "26h", "6.1.0-57-amd64",
			n1.CertExpiry.UTC().Format(time.DateOnly), "(in", "60d)"}, rowOf(t, out, "n1"))
		row := rowOf(t, out, url(down))
		assert.Equal(t, []string{"-", "-", "-", "-", "-", "-", "unreachable"}, row[1:8])
		assert.Contains(t, strings.Join(row, " "), "connection refused")
	})

	t.Run("cluster dir", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(filepath.Join(dir, cluster.PKIDir), os.DirFS(adminDir)))
		require.NoError(t, cluster.WriteState(dir, cluster.State{Nodes: []cluster.Node{
			{Name: "n1", APIPort: up1}, {Name: "n2", APIPort: up2},
		}}))
		out, _, err := runStatusCLI(t, "--dir", dir)
		t.Log("\n" + out)
		require.Error(t, err, "an unhealthy node, and one whose certificate expires soon, make the exit status non-zero")
		assert.Equal(t, exitError, exitCode(err))
		assert.Contains(t, err.Error(), "n2: not a healthy member (role learner)")
		assert.Contains(t, err.Error(), "n2: certificate "+n2.CertExpiry.UTC().Format(time.DateOnly)+" (in 3d, EXPIRES SOON)")
		assert.NotContains(t, err.Error(), "n1")
		assert.Contains(t, out, "n2: last rollback: slot b: gate failed: not a voting member after 120s\n")
		row := rowOf(t, out, "n2")
		assert.Equal(t, []string{"n2", "v1", "3.7.3", "a", "no", "learner", "no", "unhealthy"}, row[:8])
		assert.Contains(t, strings.Join(row[8:], " "), "(in 3d, EXPIRES SOON)", "a certificate within 14 days is flagged")
		assert.NotContains(t, strings.Join(rowOf(t, out, "n1"), " "), "SOON")
		assert.Contains(t, out, "n2: upgrade to registry.example/etcdbox@sha256:00: failed: pull: 404\n")

		// The node down in state.json is named by its state name.
		require.NoError(t, cluster.WriteState(dir, cluster.State{Nodes: []cluster.Node{
			{Name: "n1", APIPort: up1}, {Name: "n3", APIPort: down},
		}}))
		out, _, err = runStatusCLI(t, "--dir", dir)
		assert.ErrorContains(t, err, "1 of 2 nodes did not answer: n3")
		assert.Equal(t, "unreachable", rowOf(t, out, "n3")[7])
	})

	t.Run("wrong CA", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "pki")
		require.NoError(t, pki.Init(other, false))
		out, _, err := runStatusCLI(t, "--endpoints", url(up1), "--pki", other)
		require.Error(t, err)
		assert.Contains(t, strings.Join(rowOf(t, out, url(up1)), " "), "certificate signed by unknown authority")
	})
}

func TestStatusFlags(t *testing.T) {
	empty := t.TempDir()
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither", nil, "at least one of the flags in the group [endpoints dir] is required"},
		{"both", []string{"--dir", empty, "--endpoints", "https://127.0.0.1:1"}, "none of the others can be"},
		{"endpoints without pki", []string{"--endpoints", "https://127.0.0.1:1"}, "--pki is required with --endpoints"},
		{"dir without cluster", []string{"--dir", empty}, "state.json is missing); use --endpoints"},
		{"pki without admin certificate", []string{"--endpoints", "https://127.0.0.1:1", "--pki", empty}, "load admin certificate"},
		{"http endpoint", []string{"--endpoints", "http://127.0.0.1:1", "--pki", adminDir}, `scheme "http", want https`},
		{"arguments", []string{"n1"}, `unknown command "n1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runStatusCLI(t, tc.args...)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestStatusCertExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"unknown", time.Time{}, "-"},
		{"far", now.Add(89*24*time.Hour + time.Hour), "2026-05-29 (in 89d)"},
		{"15 days", now.Add(15 * 24 * time.Hour), "2026-03-16 (in 15d)"},
		{"14 days", now.Add(14 * 24 * time.Hour), "2026-03-15 (in 14d)"},
		{"just under 14 days", now.Add(14*24*time.Hour - time.Minute), "2026-03-15 (in 13d, EXPIRES SOON)"},
		{"hours", now.Add(5 * time.Hour), "2026-03-01 (in 5h, EXPIRES SOON)"},
		{"minutes", now.Add(30 * time.Minute), "2026-03-01 (in 30m, EXPIRES SOON)"},
		{"expired", now.Add(-3 * 24 * time.Hour), "2026-02-26 (EXPIRED 3d ago)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, certExpiry(tc.at, now))
		})
	}
}

// TestStatusJSON checks -o json: one object per node in order, the node
// API's status as it sent it, or the error.
func TestStatusJSON(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	n1 := nodeapi.Status{Name: "n1", Version: "v2", EtcdVersion: "3.7.3", Slot: "a", Blessed: true, Kernel: "6.1.0-57-amd64", Uptime: time.Hour,
		Member:     nodeapi.Member{ID: "8e9e05c52164694d", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
		CertExpiry: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC), Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle}}
	up := serveStatusNode(t, adminDir, n1)
	down := downPort(t)
	url := func(port int) string { return "https://127.0.0.1:" + strconv.Itoa(port) }
	out, _, err := runStatusCLI(t, "--endpoints", url(up)+","+url(down), "--pki", adminDir, "-o", "json")
	require.Error(t, err, "the node down still makes the exit status non-zero")
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 2)
	assert.Equal(t, "n1", rows[0]["node"])
	assert.Equal(t, url(up), rows[0]["endpoint"])
	st, ok := rows[0]["status"].(map[string]any)
	require.True(t, ok, out)
	assert.Equal(t, "1h0m0s", st["uptime"])
	assert.Equal(t, "6.1.0-57-amd64", st["kernel"])
	assert.Equal(t, "2099-01-02T03:04:05Z", st["certExpiry"])
	assert.Equal(t, map[string]any{"id": "8e9e05c52164694d", "clusterID": "", "role": "voter", "leader": true, "healthy": true}, st["member"])
	assert.NotContains(t, rows[0], "error")
	assert.Equal(t, url(down), rows[1]["node"])
	assert.Contains(t, rows[1]["error"], "connection refused")
	assert.NotContains(t, rows[1], "status")

	_, _, err = runStatusCLI(t, "--endpoints", url(up), "--pki", adminDir, "-o", "xml")
	assert.ErrorContains(t, err, `-o "xml": want one of table, json, yaml`)
	assert.Equal(t, exitUsage, exitCode(err))
}

// TestStatusAlarms: an alarm the nodes report is printed once, with what
// to do, and fails the status.
func TestStatusAlarms(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nospace := "memberID:2cb1b1df6cf9bd9a alarm:NOSPACE "
	var results []statusResult
	for _, name := range []string{"n1", "n2"} {
		st := nodeapi.Status{Name: name, Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true, Alarms: []string{nospace}}}
		results = append(results, statusResult{target: statusTarget{name: name, endpoint: name}, status: st})
	}
	results = append(results, statusResult{target: statusTarget{name: "n3"}, err: errors.New("connection refused")})
	var b strings.Builder
	printNodeStatus(&b, results, now)
	assert.Equal(t, 1, strings.Count(b.String(), "alarm "+nospace+": a database reached its quota"), b.String())
	assert.Contains(t, b.String(), "etcdbox maintain")
	err := statusProblems(results, now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "alarm "+nospace+" raised")

	results = results[:2]
	for i := range results {
		results[i].status.Member.Alarms = nil
	}
	assert.NoError(t, statusProblems(results, now))
}

// TestStatusBackups: the newest backup any node reports is shown with its
// age, and one older than twice the interval fails the status.
func TestStatusBackups(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(age time.Duration, node string) statusResult {
		st := nodeapi.Status{Name: node, Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true},
			Backups: nodeapi.BackupSchedule{Interval: 30 * time.Minute, LastNode: "n2", LastName: "etcd-x.db", LastMember: "n3", LastTaken: now.Add(-age)}}
		return statusResult{target: statusTarget{name: node, endpoint: node}, status: st}
	}
	results := []statusResult{at(50*time.Minute, "n1"), at(20*time.Minute, "n2")}
	var b strings.Builder
	printNodeStatus(&b, results, now)
	assert.Contains(t, b.String(), "backups: every 30m0s; the last, etcd-x.db of member n3, is on n2, taken 20m ago\n")
	assert.NoError(t, statusProblems(results, now))

	results = []statusResult{at(61*time.Minute, "n1")}
	err := statusProblems(results, now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "taken 61m ago (LATE: more than twice the interval")

	none := nodeapi.Status{Name: "n1", Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}, Backups: nodeapi.BackupSchedule{Interval: time.Hour}}
	b.Reset()
	printNodeStatus(&b, []statusResult{{target: statusTarget{name: "n1"}, status: none}}, now)
	assert.Contains(t, b.String(), "backups: every 1h0m0s, none taken yet")

	// A failed try after the last backup says where and why, and the
	// late note sends to that node's log; one before it is forgotten.
	failed := at(61*time.Minute, "n1")
	failed.status.Backups.FailedNode, failed.status.Backups.FailedAt = "n3", now.Add(-3*time.Minute)
	failed.status.Backups.Failed = "no room on DATA (...): not taken"
	err = statusProblems([]statusResult{failed}, now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(LATE: more than twice the interval; see the holder's log, etcdbox logs n3); the last try, on n3 3m ago, failed: no room on DATA (...): not taken")
	failed.status.Backups.FailedAt = now.Add(-62 * time.Minute)
	b.Reset()
	printNodeStatus(&b, []statusResult{failed}, now)
	assert.NotContains(t, b.String(), "the last try")
	assert.Contains(t, b.String(), "etcdbox logs n2)")

	none.Backups.FailedNode, none.Backups.FailedAt, none.Backups.Failed = "n1", now.Add(-time.Minute), "member list: no leader"
	b.Reset()
	printNodeStatus(&b, []statusResult{{target: statusTarget{name: "n1"}, status: none}}, now)
	assert.Contains(t, b.String(), "backups: every 1h0m0s, none taken yet; the last try, on n1 1m ago, failed: member list: no leader")
}

// TestStatusPKI: a CA rotation under way and the node's PKI warnings are
// printed under the table; only a certificate near its expiry fails the
// status.
func TestStatusPKI(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	healthy := nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}
	warn := "the seed carries the root CA's key (pki.caKey): any node can mint an admin certificate"
	results := []statusResult{
		{target: statusTarget{name: "n1"}, status: nodeapi.Status{Name: "n1", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour),
			PKI: nodeapi.PKI{Issuer: nodeapi.IssuerRootKey, Warnings: []string{warn}}}},
		{target: statusTarget{name: "n2"}, status: nodeapi.Status{Name: "n2", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour),
			PKI: nodeapi.PKI{Issuer: nodeapi.IssuerNodeCA, Rotation: nodeapi.CARotation{ID: "0123456789abcdef", Phase: nodeapi.RotationReissue}}}},
		{target: statusTarget{name: "n3"}, status: nodeapi.Status{Name: "n3", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour),
			PKI: nodeapi.PKI{Issuer: nodeapi.IssuerNodeCA, Rotation: nodeapi.CARotation{ID: "0123456789abcdef", Phase: nodeapi.RotationDrop}}}},
	}
	var b strings.Builder
	printNodeStatus(&b, results, now)
	t.Log("\n" + b.String())
	assert.Contains(t, b.String(), "\nn1: pki: "+warn+"\n")
	assert.Contains(t, b.String(), "\nn2: CA rotation 0123456789abcdef at phase reissue\n")
	assert.NotContains(t, b.String(), "n3: CA rotation", "a rotation in its drop phase is done on that node")
	assert.NotContains(t, b.String(), "watchdog", "no node said it has none")
	assert.NoError(t, statusProblems(results, now))

	results[1].status.CertExpiry = now.Add(3 * 24 * time.Hour)
	err := statusProblems(results, now)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "n2: certificate 2026-03-04 (in 3d, EXPIRES SOON)")
}

// TestStatusWatchdog: a node without a hardware watchdog is named, since
// nothing resets it when it hangs; one with a watchdog, or one that does
// not tell (container mode), is not.
func TestStatusWatchdog(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	healthy := nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}
	results := []statusResult{
		{target: statusTarget{name: "n1"}, status: nodeapi.Status{Name: "n1", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour), Watchdog: "/dev/watchdog (iTCO_wdt), timeout 30s"}},
		{target: statusTarget{name: "n2"}, status: nodeapi.Status{Name: "n2", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour), Watchdog: nodeapi.WatchdogNone}},
		{target: statusTarget{name: "n3"}, status: nodeapi.Status{Name: "n3", Member: healthy, CertExpiry: now.Add(60 * 24 * time.Hour)}},
	}
	var b strings.Builder
	printNodeStatus(&b, results, now)
	t.Log("\n" + b.String())
	assert.Contains(t, b.String(), "\nn2: no hardware watchdog: a hang is never reset")
	assert.NotContains(t, b.String(), "n1: no hardware watchdog")
	assert.NotContains(t, b.String(), "n3: no hardware watchdog")
	assert.NoError(t, statusProblems(results, now), "a warning, not a problem")
}

// TestStatusStorage: the DB/QUOTA and DATA FREE cells, and the notes on a
// database near its quota and on DATA that could fill before the quota
// stops the database. Neither note changes the exit status.
func TestStatusStorage(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const mib, gib = 1 << 20, 1 << 30
	node := func(name string, s nodeapi.Storage) statusResult {
		st := nodeapi.Status{Name: name, Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}, Storage: s}
		return statusResult{target: statusTarget{name: name, endpoint: name}, status: st}
	}
	results := []statusResult{
		// Plenty of room.
		node("n1", nodeapi.Storage{DataBytes: 1536 * mib, DataFree: 1331 * mib, Quota: 589 * mib, DBSize: 24 << 10, DBInUse: 16 << 10}),
		// 85% of the quota, two thirds of it free pages.
		node("n2", nodeapi.Storage{DataBytes: 20 * gib, DataFree: 15 * gib, Quota: 2 * gib, DBSize: 1741 * mib, DBInUse: 600 * mib}),
		// Backups took the room the database may still grow into.
		node("n3", nodeapi.Storage{DataBytes: 1536 * mib, DataFree: 300 * mib, Backups: 700 * mib, Quota: 589 * mib, DBSize: 200 * mib, DBInUse: 190 * mib}),
		// A node that does not report its storage.
		node("n4", nodeapi.Storage{}),
	}
	var b strings.Builder
	printNodeStatus(&b, results, now)
	out := b.String()
	t.Log("\n" + out)
	cells := func(name string) []string { return rowOf(t, out, name)[8:10] }
	assert.Equal(t, []string{"24K/589M", "1.3G/1.5G"}, cells("n1"))
	assert.Equal(t, []string{"1.7G/2.0G", "15G/20G"}, cells("n2"))
	assert.Equal(t, []string{"200M/589M", "300M/1.5G"}, cells("n3"))
	assert.Equal(t, []string{"-", "-"}, cells("n4"))

	assert.NotContains(t, out, "n1: DATA")
	assert.NotContains(t, out, "n1: DATABASE")
	assert.Contains(t, out, "n2: DATABASE NEAR ITS QUOTA: 1.7 GiB of 2.0 GiB (85%); at the quota etcd raises NOSPACE and takes only reads and deletes; 600 MiB of it is in use, so etcdbox defrag (or maintain) would give back about 1.1 GiB\n")
	assert.NotContains(t, out, "n2: DATA LOW")
	assert.Contains(t, out, "n3: DATA LOW: 300 MiB free, but the database may still grow by 389 MiB before its quota stops it, and its WAL needs up to 128 MiB: the disk can fill first, and etcd stops on a failed write; grow the disk (the node grows DATA with it at boot), or keep fewer backups (the seed's backup.keep; here they take 700 MiB)\n")
	assert.NotContains(t, out, "n3: DATABASE")
	assert.NotContains(t, out, "n4:")
	assert.NoError(t, statusProblems(results, now), "storage notes warn; they do not fail the status")

	// A database at its quota whose pages are in use: compaction first.
	full := node("n5", nodeapi.Storage{DataBytes: 20 * gib, DataFree: 15 * gib, Quota: 2 * gib, DBSize: 2 * gib, DBInUse: 2*gib - mib})
	b.Reset()
	printNodeStatus(&b, []statusResult{full}, now)
	assert.Contains(t, b.String(), "n5: DATABASE NEAR ITS QUOTA: 2.0 GiB of 2.0 GiB (100%); at the quota etcd raises NOSPACE and takes only reads and deletes; etcdbox maintain compacts the history and defragments\n")
}

func TestShortSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 512: "512", 24 << 10: "24K", 1536 << 10: "1.5M", 589 << 20: "589M", 15 << 30: "15G", 3 << 40: "3.0T"} {
		assert.Equal(t, want, shortSize(n), "%d", n)
	}
}
