package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// indent indents every line of s by n spaces, for a YAML block scalar.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}

// TestSeedExampleAndCheck: the example parses once a real CA is put in;
// seed check accepts it, and names every problem of a bad seed at once.
func TestSeedExampleAndCheck(t *testing.T) {
	out, _, code, err := runExit(t, "seed", "example")
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, seedExample, out)

	ca, err := pki.NewCA("example", 0)
	require.NoError(t, err)
	nodeCA, err := ca.IssueNodeCA(pki.NodeScope{Domains: []string{"etcd.example.internal"}}, 0)
	require.NoError(t, err)
	key, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	good := strings.Replace(out, "    NODE CA CERTIFICATE PEM", indent(string(nodeCA.CertPEM()), 4), 1)
	good = strings.Replace(good, "    NODE CA KEY PEM", indent(string(key), 4), 1)
	good = strings.Replace(good, "    CA CERTIFICATE PEM", indent(string(ca.CertPEM()), 4), 1)
	s, err := seed.Parse([]byte(good))
	require.NoError(t, err, "the example with a real CA is a good seed:\n%s", good)
	assert.Equal(t, "etcd.example.internal", s.Discovery.SRV)
	assert.Equal(t, 3, s.Discovery.InitialSize)
	// Its commented etcd settings are good too, once uncommented.
	tuned := good
	for _, key := range []string{"autoCompactionMode", "logLevel", "metricsPort", "extraArgs"} {
		tuned = strings.Replace(tuned, "# "+key, key, 1)
	}
	tuned = strings.ReplaceAll(tuned, "#   - --", "  - --")
	tuned = strings.Replace(tuned, "autoCompactionRetention: 1h", `autoCompactionRetention: "10000"`, 1)
	s, err = seed.Parse([]byte(tuned))
	require.NoError(t, err, "the example's etcd settings:\n%s", tuned)
	assert.Equal(t, seed.Etcd{ClientPort: 2379, PeerPort: 2380, HTTPPort: 2382, AutoCompactionMode: "revision", AutoCompactionRetention: "10000",
		LogLevel: "warn", MetricsPort: 2381, ExtraArgs: []string{"--heartbeat-interval=250", "--election-timeout=2500"}}, s.Etcd)

	dir := t.TempDir()
	p := filepath.Join(dir, "seed.yaml")
	require.NoError(t, os.WriteFile(p, []byte(good), 0o600))
	out, _, code, err = runExit(t, "seed", "check", p)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, p+": a good seed for cluster \"prod\" (DNS SRV under etcd.example.internal)\n", out)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(good, "clientPort: 2379", "clientPort: 99999\n  nmae: x", 1)), 0o600))
	_, _, code, err = runExit(t, "seed", "check", bad)
	assert.Equal(t, exitError, code)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad+": ")
	// One problem a line, each at the line of its key.
	text, _ := os.ReadFile(bad)
	lineOf := func(sub string) int {
		for i, l := range strings.Split(string(text), "\n") {
			if strings.Contains(l, sub) {
				return i + 1
			}
		}
		t.Fatalf("no %q in the seed", sub)
		return 0
	}
	msg := strings.Split(err.Error(), "\n")
	require.Len(t, msg, 3, err.Error())
	assert.Equal(t, bad+": 2 problem(s):", msg[0])
	assert.Contains(t, msg, fmt.Sprintf("  %s:%d: etcd.nmae: unknown key", bad, lineOf("nmae: x")))
	assert.True(t, slices.ContainsFunc(msg, func(l string) bool {
		return strings.HasPrefix(l, fmt.Sprintf("  %s:%d: etcd.clientPort: ", bad, lineOf("clientPort: 99999")))
	}), "the port's line: %q", msg)

	_, _, code, err = runExit(t, "seed", "check")
	assert.Equal(t, exitUsage, code, "FILE is required: %v", err)
	_, _, code, err = runExit(t, "seed", "check", filepath.Join(dir, "missing.yaml"))
	assert.Equal(t, exitError, code)
	assert.ErrorContains(t, err, "missing.yaml")
}
