package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeedCommand(t *testing.T) {
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, "pki")
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"pki", "init", "--dir", pkiDir}, &out, &out))

	yamlPath := filepath.Join(dir, "seed.yaml")
	require.NoError(t, run(t.Context(), []string{"seed", "--cluster", "prod", "--pki", pkiDir,
		"--srv", "etcd.example.internal", "--initial-size", "3", "-o", yamlPath}, &out, &out))
	data, err := os.ReadFile(yamlPath)
	require.NoError(t, err)
	s, err := seed.Parse(data)
	require.NoError(t, err)
	assert.Equal(t, "prod", s.Cluster)
	assert.Equal(t, "etcd.example.internal", s.Discovery.SRV)
	assert.Equal(t, 3, s.Discovery.InitialSize)
	ca, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	require.NoError(t, err)
	assert.Equal(t, string(ca), s.PKI.CACert)

	img := filepath.Join(dir, "seed.img")
	require.NoError(t, run(t.Context(), []string{"seed", "--from", yamlPath, "-o", img}, &out, &out))
	fsck, err := exec.Command("fsck.vfat", "-n", img).CombinedOutput()
	assert.NoError(t, err, "%s", fsck)

	// The kernel argument: gzipped, it fits the command line, and reads
	// back to the same seed; the file holds a key, so it is 0600.
	arg := filepath.Join(dir, "seed.cmdline")
	require.NoError(t, run(t.Context(), []string{"seed", "--from", yamlPath, "-o", arg}, &out, &out))
	fi, err := os.Stat(arg)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	line, err := os.ReadFile(arg)
	require.NoError(t, err)
	assert.Less(t, len(line), 2047-len("console=ttyS0,115200 panic=10 etcdbox.slot=a "))
	back, ok, err := seed.FromCmdline("console=ttyS0 " + strings.TrimSpace(string(line)))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, data, back)

	peers := filepath.Join(dir, "peers.yaml")
	require.NoError(t, run(t.Context(), []string{"seed", "--cluster", "dev", "--pki", pkiDir,
		"--peer", "n1=10.0.0.11", "--peer", "n2=10.0.0.12:12380:12379", "-o", peers}, &out, &out))
	data, err = os.ReadFile(peers)
	require.NoError(t, err)
	s, err = seed.Parse(data)
	require.NoError(t, err)
	require.Len(t, s.Discovery.Peers, 2)
	assert.Equal(t, 12380, s.Discovery.Peers[1].PeerPort)
	assert.Equal(t, 12379, s.Discovery.Peers[1].ClientPort)
}

func TestSeedCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("cluster: demo\nnetwrk: {}\n"), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad key in --from", []string{"--from", bad, "-o", filepath.Join(dir, "x.img")}, "netwrk"},
		{"missing --from file", []string{"--from", filepath.Join(dir, "nope.yaml"), "-o", filepath.Join(dir, "x.img")}, "--from"},
		{"no pki", []string{"--cluster", "c", "-o", filepath.Join(dir, "x.yaml")}, "--pki"},
		{"bad peer", []string{"--cluster", "c", "--pki", dir, "--peer", "n1", "-o", filepath.Join(dir, "x.yaml")}, `--peer "n1"`},
		{"bad cluster name", []string{"--from", bad, "--cluster", "X", "-o", filepath.Join(dir, "x.yaml")}, "drop the other seed flags"},
		{"--from with --srv-name", []string{"--from", bad, "--srv-name", "prod", "-o", filepath.Join(dir, "x.yaml")}, "drop the other seed flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), append([]string{"seed"}, tt.args...), &out, &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			_, statErr := os.Stat(filepath.Join(dir, "x.img"))
			assert.True(t, os.IsNotExist(statErr), "no output after an error")
		})
	}
}
