package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/pki"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, args, &out, &out)
	return out.String(), err
}

func TestClusterUpFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no dir", []string{"cluster", "up"}, `"dir" not set`},
		{"many nodes", []string{"cluster", "up", "--nodes", "3", "--dir", t.TempDir()}, "--nodes 3: only single-node"},
		{"down without dir", []string{"cluster", "down"}, `"dir" not set`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCLI(t, tt.args...)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestNodeSeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	b, err := nodeSeed(dir, "n1")
	require.NoError(t, err)
	s, err := discovery.ParseSeed(b)
	require.NoError(t, err, "seed:\n%s", b)
	assert.Equal(t, "etcdbox", s.Cluster)
	assert.Equal(t, "n1", s.Name)
	assert.Equal(t, 1, s.Discovery.InitialSize)
	ca, err := pki.LoadCA([]byte(s.PKI.CACert), []byte(s.PKI.CAKey))
	require.NoError(t, err)
	want, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	assert.True(t, ca.Cert.Equal(want.Cert), "the seed carries the cluster's CA")
}

func TestEtcdctlEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a dir")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, writeEtcdctlEnv(dir, []string{"https://127.0.0.1:4001"}))
	// The file is for a POSIX shell: source it and print what etcdctl sees.
	out, err := exec.Command("sh", "-c", `. "$1"; printf '%s\n' "$ETCDCTL_ENDPOINTS" "$ETCDCTL_CACERT" "$ETCDCTL_CERT" "$ETCDCTL_KEY"`,
		"sh", filepath.Join(dir, "etcdctl.env")).Output()
	require.NoError(t, err)
	assert.Equal(t, []string{
		"https://127.0.0.1:4001",
		filepath.Join(dir, "pki", "ca.crt"),
		filepath.Join(dir, "pki", "admin.crt"),
		filepath.Join(dir, "pki", "admin.key"),
	}, strings.Split(strings.TrimSpace(string(out)), "\n"))
}

func TestClusterDown(t *testing.T) {
	dir := t.TempDir()
	_, err := runCLI(t, "cluster", "down", "--dir", dir)
	assert.ErrorContains(t, err, "state.json is missing")

	// n1 crashed earlier (a stale pid file); n2 is a live process in its
	// directory that answers no QMP, so down must stop it by force.
	n1, n2 := filepath.Join(dir, "n1"), filepath.Join(dir, "n2")
	require.NoError(t, os.MkdirAll(n1, 0o755))
	require.NoError(t, os.MkdirAll(n2, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n1, "qemu.pid"), []byte("999999999\n"), 0o644))
	hung := exec.Command("sleep", "600")
	hung.Dir = n2
	require.NoError(t, hung.Start())
	exited := make(chan error, 1)
	go func() { exited <- hung.Wait() }()
	t.Cleanup(func() { hung.Process.Kill() })
	require.NoError(t, os.WriteFile(filepath.Join(n2, "qemu.pid"), []byte(strconv.Itoa(hung.Process.Pid)), 0o644))
	require.NoError(t, writeClusterState(dir, clusterState{Nodes: []nodeState{{Name: "n1", Dir: n1}, {Name: "n2", Dir: n2}}}))
	require.NoError(t, writeEtcdctlEnv(dir, []string{"https://127.0.0.1:1"}))

	_, err = runCLI(t, "cluster", "up", "--dir", dir)
	assert.ErrorContains(t, err, "is up (n2 is pid")

	out, err := runCLI(t, "cluster", "down", "--dir", dir, "--timeout", "1s")
	require.NoError(t, err, out)
	assert.Contains(t, out, "n1: not running")
	assert.Contains(t, out, "vm n2: guest did not power off")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("down left the process running")
	}
	assert.NoFileExists(t, filepath.Join(dir, "state.json"))
	assert.NoFileExists(t, filepath.Join(dir, "etcdctl.env"))
}

func TestClusterStateJSON(t *testing.T) {
	dir := t.TempDir()
	st := clusterState{Image: "/i.img", Nodes: []nodeState{{Name: "n1", Dir: "/d/n1", PID: 7, QMP: "/d/n1/qmp.sock", Console: "/d/n1/console.log", ClientPort: 4001, APIPort: 4002}}}
	require.NoError(t, writeClusterState(dir, st))
	got, err := readClusterState(dir)
	require.NoError(t, err)
	assert.Equal(t, st, got)
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"clientPort": 4001`)
}
