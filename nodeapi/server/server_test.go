package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
)

const goodRef = "registry.example:5000/etcdbox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestBackups: the admin lists the kept snapshots, takes one, and gets
// one whole with the SHA-256 the node names; a name the node does not
// keep, or a path, is a 404 that says so.
func TestBackups(t *testing.T) {
	p := newTestPKI(t)
	db := bytes.Repeat([]byte("snapshot "), 10000)
	node := &fakeNode{backups: map[string][]byte{"etcd-1.db": db, "etcd-2.db": []byte("x")}}
	endpoint := startServer(t, p, node)
	c, err := nodeapi.NewClient(endpoint, p.admin)
	require.NoError(t, err)
	ctx := t.Context()

	list, err := c.Backups(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "etcd-1.db", list[0].Name)
	assert.Equal(t, int64(len(db)), list[0].Size)
	var got bytes.Buffer
	sum, err := c.GetBackup(ctx, "etcd-1.db", &got)
	require.NoError(t, err)
	assert.Equal(t, db, got.Bytes())
	assert.Equal(t, "sum-of-etcd-1.db", sum)
	for _, name := range []string{"etcd-3.db", "../state/pki/ca.key"} {
		_, err = c.GetBackup(ctx, name, io.Discard)
		ae := apiError(t, err)
		assert.Equal(t, http.StatusNotFound, ae.StatusCode, name)
		assert.Contains(t, ae.Message, "no snapshot "+strconv.Quote(name)+" on this node")
	}
	snap, err := c.Backup(ctx)
	require.NoError(t, err)
	assert.Equal(t, "etcd-new.db", snap.Name)
	assert.Equal(t, 1, node.backedUp)
}

// TestFormation: any node certificate reads the formation answer (the
// handshake runs between nodes); only the admin changes it.
func TestFormation(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{formation: nodeapi.Formation{Name: "n1", Cluster: "demo", Nonce: "abc"}}
	endpoint := startServer(t, p, node)
	ctx := t.Context()

	peer, err := nodeapi.NewClientTLS(endpoint, p.clientTLS(t, p.ca, "n2"))
	require.NoError(t, err)
	f, err := peer.Formation(ctx)
	require.NoError(t, err)
	assert.Equal(t, node.formation, f)

	admin, err := nodeapi.NewClient(endpoint, p.admin)
	require.NoError(t, err)
	f, err = admin.FormWithout(ctx, []string{"n3"})
	require.NoError(t, err)
	assert.Equal(t, []string{"n3"}, f.Without)

	_, err = admin.FormWithout(ctx, nil)
	assert.Equal(t, http.StatusBadRequest, apiError(t, err).StatusCode)
	node.formErr = fmt.Errorf("%w: n9 is not an expected initial member", server.ErrBadRequest)
	_, err = admin.FormWithout(ctx, []string{"n9"})
	assert.Equal(t, http.StatusBadRequest, apiError(t, err).StatusCode)
	assert.Contains(t, apiError(t, err).Message, "n9 is not an expected initial member")
	node.formErr = fmt.Errorf("%w: already started formation demo-1", server.ErrBusy)
	_, err = admin.FormWithout(ctx, []string{"n3"})
	assert.Equal(t, http.StatusConflict, apiError(t, err).StatusCode)
}

func TestClientAgainstServer(t *testing.T) {
	p := newTestPKI(t)
	want := nodeapi.Status{
		Name: "n1", Cluster: "demo", Version: "v2", EtcdVersion: "3.7.3", Kernel: "6.1.0-57-amd64",
		Slot: "b", Blessed: true,
		Slots: []nodeapi.Slot{
			{Name: "a", Generation: 1, State: nodeapi.SlotBlessed},
			{Name: "b", Generation: 2, State: nodeapi.SlotBlessed},
		},
		Member:     nodeapi.Member{ID: "8e9e05c52164694d", ClusterID: "cdf818194e3a8c32", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
		CertExpiry: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
		Uptime:     26*time.Hour + 3*time.Minute,
		Upgrade:    nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
	}
	node := &fakeNode{status: want, logs: []string{"one", "two", "three", "four"}}
	endpoint := startServer(t, p, node)
	c, err := nodeapi.NewClient(endpoint, p.admin)
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()

	got, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	lines, err := c.Logs(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"three", "four"}, lines, "Logs(2) cuts to the last lines")
	lines, err = c.Logs(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, node.logs, lines)

	// Following: the newest lines with the number to follow from, then
	// what came after it.
	page, err := c.LogsAfter(ctx, 0, 3)
	require.NoError(t, err)
	boot := page.Boot
	assert.NotEmpty(t, boot, "the boot's ID")
	assert.Equal(t, nodeapi.LogPage{Lines: []string{"two", "three", "four"}, Last: 4, Boot: boot}, page)
	node.mu.Lock()
	node.logs = append(node.logs, "five", "six")
	node.mu.Unlock()
	page, err = c.LogsAfter(ctx, page.Last, 0)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.LogPage{Lines: []string{"five", "six"}, Last: 6, Boot: boot}, page)
	page, err = c.LogsAfter(ctx, page.Last, 0)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.LogPage{Last: 6, Boot: boot}, page, "nothing new")
	node.mu.Lock()
	node.dropLines = 5
	node.mu.Unlock()
	page, err = c.LogsAfter(ctx, 2, 0)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.LogPage{Lines: []string{"six"}, Last: 6, Dropped: 3, Boot: boot}, page, "lines 3 to 5 are gone")

	require.NoError(t, c.StageUpgrade(ctx, goodRef))
	assert.Equal(t, []string{goodRef}, node.staged)
	prog, err := c.Upgrade(ctx)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.UpgradeProgress{Target: goodRef, Phase: nodeapi.PhasePulling}, prog)
	got, err = c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, prog, got.Upgrade, "the status carries the upgrade progress")

	require.NoError(t, c.HoldUpgrade(ctx, goodRef))
	assert.Equal(t, []string{goodRef}, node.held, "hold reaches the node as a held stage")
	assert.Equal(t, []string{goodRef}, node.staged)
	prog, err = c.ArmUpgrade(ctx, goodRef)
	require.NoError(t, err)
	assert.Equal(t, []string{goodRef}, node.armed)
	assert.Equal(t, nodeapi.UpgradeProgress{Target: goodRef, Phase: nodeapi.PhaseStaged}, prog, "arm answers the progress after arming")
	_, err = c.ArmUpgrade(ctx, "registry.example/etcdbox:v2")
	assert.Equal(t, http.StatusBadRequest, apiError(t, err).StatusCode, "arm checks the reference")
	assert.Len(t, node.armed, 1)

	require.NoError(t, c.Reboot(ctx))
	assert.Equal(t, 1, node.reboots)

	node.snapshot = nodeapi.Snapshot{Path: "/var/lib/etcdbox/backups/etcd-1.db", Size: 20480, Revision: 7, Taken: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	snap, err := c.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, node.snapshot, snap)

	node.decommission = nodeapi.Decommissioned{Node: "n1", MemberID: "8e9e05c52164694d", Reason: "retire", Tombstone: "/var/lib/etcdbox/state/decommissioned", At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	d, err := c.Decommission(ctx, "n1", "retire")
	require.NoError(t, err)
	assert.Equal(t, node.decommission, d)
	assert.Equal(t, []nodeapi.DecommissionRequest{{Node: "n1", Reason: "retire"}}, node.decommissioned)

	node.recovery = nodeapi.Recovery{Token: "recover-a-b", Phase: nodeapi.RecoveryRestored, From: "a", Revision: 42, Bump: 1_000_000_000}
	rec, err := c.Recover(ctx, nodeapi.RecoverRequest{Survivor: "n1", Token: "recover-a-b"})
	require.NoError(t, err)
	assert.Equal(t, node.recovery, rec)
	assert.Equal(t, []nodeapi.RecoverRequest{{Survivor: "n1", Token: "recover-a-b"}}, node.recovers)

	rs, err := c.Restore(ctx, nodeapi.RestoreRequest{Token: "restore-x", Step: nodeapi.RestoreFence})
	require.NoError(t, err)
	assert.Equal(t, node.recovery, rs)
	assert.Equal(t, []nodeapi.RestoreRequest{{Token: "restore-x", Step: nodeapi.RestoreFence}}, node.restores)
	snapFile := filepath.Join(t.TempDir(), "s.db")
	require.NoError(t, os.WriteFile(snapFile, []byte("snapshot bytes"), 0o600))
	f, err := os.Open(snapFile)
	require.NoError(t, err)
	defer f.Close()
	_, err = c.SendRestoreSnapshot(ctx, "restore-x", f)
	require.NoError(t, err)
	assert.Equal(t, []string{"restore-x:snapshot bytes"}, node.received, "the file is the body, whole")

	// The server's message reaches the caller.
	err = c.StageUpgrade(ctx, "registry.example/etcdbox:v2")
	require.Error(t, err)
	assert.Equal(t, http.StatusBadRequest, apiError(t, err).StatusCode)
	assert.Contains(t, err.Error(), "POST "+endpoint+"/v1/upgrade: 400 Bad Request: image \"registry.example/etcdbox:v2\": no digest")
	assert.Len(t, node.staged, 1)
}

func TestNodeErrors(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{
		statusErr:       fmt.Errorf("read release: file does not exist"),
		rebootErr:       fmt.Errorf("shutdown under way: %w", server.ErrBusy),
		stageErr:        fmt.Errorf("staging %s: %w", goodRef, server.ErrBusy),
		armErr:          fmt.Errorf("slot b holds %s: %w", "other", server.ErrRefused),
		snapErr:         fmt.Errorf("etcd not running"),
		decommissionErr: fmt.Errorf("remove n1: %w: removing n1 would leave 1 healthy of 2 voters", server.ErrRefused),
	}
	c, err := nodeapi.NewClient(startServer(t, p, node), p.admin)
	require.NoError(t, err)
	ctx := t.Context()

	for _, tc := range []struct {
		name     string
		call     func() error
		wantCode int
		wantMsg  string
	}{
		{"status", func() error { _, err := c.Status(ctx); return err }, http.StatusInternalServerError, "status: read release: file does not exist"},
		{"reboot", func() error { return c.Reboot(ctx) }, http.StatusConflict, "reboot: shutdown under way: busy"},
		{"stage", func() error { return c.StageUpgrade(ctx, goodRef) }, http.StatusConflict, "stage upgrade: staging " + goodRef + ": busy"},
		{"arm", func() error { _, err := c.ArmUpgrade(ctx, goodRef); return err }, http.StatusConflict, "arm upgrade: slot b holds other: refused"},
		{"snapshot", func() error { _, err := c.Snapshot(ctx); return err }, http.StatusInternalServerError, "snapshot: etcd not running"},
		{"decommission", func() error { _, err := c.Decommission(ctx, "n1", ""); return err }, http.StatusConflict,
			"decommission: remove n1: refused: removing n1 would leave 1 healthy of 2 voters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ae := apiError(t, tc.call())
			assert.Equal(t, tc.wantCode, ae.StatusCode)
			assert.Equal(t, tc.wantMsg, ae.Message)
		})
	}
}

func TestBadRequests(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{}
	endpoint := startServer(t, p, node)
	hc := httpClient(p.clientTLS(t, p.ca, pki.AdminCommonName))

	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		wantCode    int
		wantMsg     string
	}{
		{"unknown field", "POST", "/v1/upgrade", "application/json", `{"imag": "x"}`, 400, `request body: unknown field "imag"`},
		{"wrong type", "POST", "/v1/upgrade", "", `{"image": 5}`, 400, `request body: field "image": want string, got JSON number`},
		{"not an object", "POST", "/v1/upgrade", "", `["x"]`, 400, "request body: want a JSON object, got JSON array"},
		{"not JSON", "POST", "/v1/upgrade", "", `image=x`, 400, "request body: invalid JSON at byte 1"},
		{"truncated", "POST", "/v1/upgrade", "", `{"image": "x"`, 400, "request body: truncated JSON"},
		{"empty", "POST", "/v1/upgrade", "", ``, 400, "request body: empty; want a JSON object"},
		{"two values", "POST", "/v1/upgrade", "", `{"image": "` + goodRef + `"} {}`, 400, "request body: more than one JSON value"},
		{"too large", "POST", "/v1/upgrade", "", `{"image": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "request body: larger than 65536 bytes"},
		{"not JSON media type", "POST", "/v1/upgrade", "text/plain", `{"image": "` + goodRef + `"}`, 415, `request body: content type "text/plain", want application/json`},
		{"no image", "POST", "/v1/upgrade", "", `{}`, 400, "image: required"},
		{"tag without digest", "POST", "/v1/upgrade", "", `{"image": "registry.example/etcdbox:v2"}`, 400, `image "registry.example/etcdbox:v2": no digest; pin it as registry.example/etcdbox:v2@sha256:<64 hex digits>`},
		{"short digest", "POST", "/v1/upgrade", "", `{"image": "registry.example/etcdbox@sha256:abc"}`, 400, `image "registry.example/etcdbox@sha256:abc": invalid checksum digest length`},
		{"no registry", "POST", "/v1/upgrade", "", `{"image": "etcdbox@sha256:` + strings.Repeat("0", 64) + `"}`, 400, "registry to be explicitly defined"},
		{"reboot option", "POST", "/v1/reboot", "", `{"force": true}`, 400, `request body: unknown field "force"`},
		{"decommission without body", "POST", "/v1/decommission", "", ``, 400, "request body: empty; want a JSON object"},
		{"decommission without node", "POST", "/v1/decommission", "", `{"reason": "x"}`, 400, "request body: node: required; name the node to decommission"},
		{"decommission unknown field", "POST", "/v1/decommission", "", `{"node": "n1", "force": true}`, 400, `request body: unknown field "force"`},
		{"GET decommission", "GET", "/v1/decommission", "", ``, 405, "method GET not allowed on /v1/decommission; use POST"},
		{"recover without survivor", "POST", "/v1/recover", "", `{"token": "recover-1-2"}`, 400, "request body: survivor: required; name the node that survived"},
		{"recover without token", "POST", "/v1/recover", "", `{"survivor": "n1"}`, 400, "request body: token: required"},
		{"recover unknown field", "POST", "/v1/recover", "", `{"survivor": "n1", "token": "t", "force": true}`, 400, `request body: unknown field "force"`},
		{"GET recover", "GET", "/v1/recover", "", ``, 405, "method GET not allowed on /v1/recover; use POST"},
		{"restore without step", "POST", "/v1/restore", "", `{"token": "restore-x"}`, 400, "request body: token and step: required"},
		{"restore snapshot without token", "POST", "/v1/restore/snapshot", "application/octet-stream", `x`, 400, "token: required"},
		{"method on upgrade", "DELETE", "/v1/upgrade", "", ``, 405, "method DELETE not allowed on /v1/upgrade; use GET or POST"},
		{"GET reboot", "GET", "/v1/reboot", "", ``, 405, "method GET not allowed on /v1/reboot; use POST"},
		{"POST status", "POST", "/v1/status", "", `{}`, 405, "method POST not allowed on /v1/status; use GET"},
		{"unknown path", "GET", "/v1/shell", "", ``, 404, `unknown path "/v1/shell"; the API has /v1/backups, /v1/decommission, /v1/formation, /v1/logs, /v1/pki/rotation, /v1/reboot, /v1/recover, /v1/restore, /v1/restore/snapshot, /v1/snapshot, /v1/status, /v1/upgrade`},
		{"unversioned path", "GET", "/status", "", ``, 404, `unknown path "/status"`},
		{"lines not a number", "GET", "/v1/logs?lines=abc", "", ``, 400, `lines: want one positive integer, got "abc"`},
		{"lines zero", "GET", "/v1/logs?lines=0", "", ``, 400, `lines: want one positive integer, got "0"`},
		{"lines twice", "GET", "/v1/logs?lines=1&lines=2", "", ``, 400, `lines: want one positive integer, got "1,2"`},
		{"after negative", "GET", "/v1/logs?after=-1", "", ``, 400, `after: want one line number (0 or more), got "-1"`},
		{"after twice", "GET", "/v1/logs?after=1&after=2", "", ``, 400, `after: want one line number (0 or more), got "1,2"`},
		{"unknown query parameter", "GET", "/v1/status?verbose=1", "", ``, 400, `unknown query parameter "verbose"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, endpoint+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.wantCode, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var body nodeapi.ErrorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Contains(t, body.Error, tc.wantMsg)
			if tc.wantCode == http.StatusMethodNotAllowed {
				assert.NotEmpty(t, resp.Header.Get("Allow"))
			}
		})
	}
	assert.Zero(t, node.callCount(), "a bad request reached the node")
}

func TestRebootWithEmptyObject(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{}
	endpoint := startServer(t, p, node)
	resp, err := httpClient(p.clientTLS(t, p.ca, pki.AdminCommonName)).Post(endpoint+nodeapi.PathReboot, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, 1, node.reboots)
	assert.False(t, node.rebootReq.NoKexec)

	c, err := nodeapi.NewClient(endpoint, p.admin)
	require.NoError(t, err)
	require.NoError(t, c.RebootWith(t.Context(), nodeapi.RebootRequest{NoKexec: true}))
	assert.Equal(t, 2, node.reboots)
	assert.True(t, node.rebootReq.NoKexec, "noKexec reaches the node")

	resp, err = httpClient(p.clientTLS(t, p.ca, pki.AdminCommonName)).Post(endpoint+nodeapi.PathReboot, "application/json", strings.NewReader(`{"noKexek":true}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "noKexek", "the misspelt option is named")
	assert.Equal(t, 2, node.reboots, "a misspelt option reboots nothing")
}

func TestServerCertificateReloadedOnHandshake(t *testing.T) {
	p := newTestPKI(t)
	endpoint := startServer(t, p, &fakeNode{})
	hc := httpClient(p.clientTLS(t, p.ca, "n2"))
	serial := func() string {
		resp, err := hc.Get(endpoint + nodeapi.PathUpgrade)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	assert.Equal(t, before, serial())
	p.issueServer(t) // a renewal
	assert.NotEqual(t, before, serial(), "the renewed leaf is served without a restart")
}

func TestNewChecksFiles(t *testing.T) {
	p := newTestPKI(t)
	_, err := server.New(server.Config{PKIDir: t.TempDir(), Node: &fakeNode{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load server certificate")
	_, err = server.New(server.Config{PKIDir: p.node})
	assert.ErrorContains(t, err, "no node")
	_, err = server.New(server.Config{Node: &fakeNode{}})
	assert.ErrorContains(t, err, "no PKI directory")
}

func TestShutdownLetsAcceptedRebootAnswer(t *testing.T) {
	// The init's reboot path shuts the server down; the 202 must still
	// reach the caller.
	p := newTestPKI(t)
	srvNode := &shutdownOnReboot{done: make(chan error, 1)}
	srv, err := server.New(server.Config{PKIDir: p.node, Node: srvNode})
	require.NoError(t, err)
	srvNode.srv = srv
	endpoint := serveOn(t, srv)
	c, err := nodeapi.NewClient(endpoint, p.admin)
	require.NoError(t, err)
	require.NoError(t, c.Reboot(t.Context()))
	require.NoError(t, <-srvNode.done)
}

// shutdownOnReboot shuts its server down from Reboot, as the init does,
// without waiting for it.
type shutdownOnReboot struct {
	fakeNode
	srv  *server.Server
	done chan error
}

func (s *shutdownOnReboot) Reboot(nodeapi.RebootRequest) error {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.done <- s.srv.Shutdown(ctx)
	}()
	return nil
}

func TestDecommissionNotThisNode(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{decommissionErr: fmt.Errorf("%w: this node is n1, not n3", server.ErrBadRequest)}
	c, err := nodeapi.NewClient(startServer(t, p, node), p.admin)
	require.NoError(t, err)
	_, err = c.Decommission(t.Context(), "n3", "")
	ae := apiError(t, err)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Equal(t, "decommission: bad request: this node is n1, not n3", ae.Message)
}
