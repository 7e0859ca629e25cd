package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// tlsFixture is a PKI, its admin certificate copied to files of other
// names in another directory (as --cacert, --cert and --key may name
// them), and a node API that answers its status.
type tlsFixture struct {
	pkiDir            string
	cacert, cert, key string
	url               string
	fileArgs          []string
}

func newTLSFixture(t *testing.T) tlsFixture {
	t.Helper()
	f := tlsFixture{pkiDir: filepath.Join(t.TempDir(), "pki")}
	require.NoError(t, pki.Init(f.pkiDir, false))
	other := t.TempDir()
	f.cacert, f.cert, f.key = filepath.Join(other, "trust.pem"), filepath.Join(other, "alice.pem"), filepath.Join(other, "alice-key.pem")
	for from, to := range map[string]string{pki.CACertFile: f.cacert, pki.AdminCertFile: f.cert, pki.AdminKeyFile: f.key} {
		b, err := os.ReadFile(filepath.Join(f.pkiDir, from))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, 0o600))
	}
	st := nodeapi.Status{Name: "n1", Version: "v2", Member: nodeapi.Member{Role: nodeapi.RoleVoter, Healthy: true}}
	f.url = "https://127.0.0.1:" + strconv.Itoa(serveStatusNode(t, f.pkiDir, st))
	f.fileArgs = []string{"--cacert", f.cacert, "--cert", f.cert, "--key", f.key}
	return f
}

// TestTLSFileFlags: --cacert, --cert and --key stand for --pki, with
// files of any name, against a real node API.
func TestTLSFileFlags(t *testing.T) {
	f := newTLSFixture(t)
	out, _, code, err := runExit(t, append([]string{"status", "--endpoints", f.url}, f.fileArgs...)...)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "v2", rowOf(t, out, "n1")[1])

	// The files are what the client presents: another CA's are refused.
	otherPKI := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(otherPKI, false))
	_, _, code, err = runExit(t, "status", "--endpoints", f.url, "--cacert", f.cacert,
		"--cert", filepath.Join(otherPKI, pki.AdminCertFile), "--key", filepath.Join(otherPKI, pki.AdminKeyFile))
	assert.Error(t, err)
	assert.Equal(t, exitError, code)

	// A missing file is named.
	_, _, code, err = runExit(t, "status", "--endpoints", f.url, "--cacert", f.cacert, "--cert", f.cert, "--key", f.key+".gone")
	assert.ErrorContains(t, err, f.key+".gone")
	assert.Equal(t, exitError, code)
}

// TestTLSFlagMixes: --pki with any of the file flags, or some of the file
// flags without the others, are usage errors, in every verb.
func TestTLSFlagMixes(t *testing.T) {
	f := newTLSFixture(t)
	verbs := [][]string{
		{"status", "--endpoints", f.url},
		{"logs", "n1", "--endpoints", f.url},
		{"reboot", "n1", "--endpoints", f.url},
		{"snapshot", "n1", "-o", filepath.Join(t.TempDir(), "s.db"), "--endpoints", f.url},
		{"decommission", "n1", "--endpoints", f.url},
		{"bootstrap", "--without", "n3", "--endpoints", f.url},
		{"recover", "--survivor", "n1", "--endpoints", f.url},
		{"members", "list", "--endpoints", f.url},
		{"alarm", "list", "--endpoints", f.url},
		{"upgrade", "--status", "--endpoints", f.url},
		{"rotate-ca", "--status", "--endpoints", f.url},
		{"backup", "list", "--endpoints", f.url},
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"pki and cacert", []string{"--pki", f.pkiDir, "--cacert", f.cacert}, "--pki and --cacert: give either --pki DIR or --cacert, --cert and --key"},
		{"pki and all three", append([]string{"--pki", f.pkiDir}, f.fileArgs...), "--pki and --cacert, --cert, --key"},
		{"cert alone", []string{"--cert", f.cert}, "--cacert, --cert and --key go together: --cert given without --cacert, --key"},
		{"no key", []string{"--cacert", f.cacert, "--cert", f.cert}, "--cacert, --cert given without --key"},
	} {
		for _, v := range verbs {
			t.Run(tc.name+"/"+strings.Join(v[:2], " "), func(t *testing.T) {
				_, _, code, err := runExit(t, append(append([]string(nil), v...), tc.flags...)...)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Equal(t, exitUsage, code)
			})
		}
	}
}

// TestTLSFlagsEverywhere: every verb that reaches nodes or etcd by
// --endpoints takes the four TLS flags and a --timeout.
func TestTLSFlagsEverywhere(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		fl := c.Flags()
		if fl.Lookup("endpoints") != nil || fl.Lookup("etcd-endpoints") != nil {
			n++
			for _, name := range []string{"pki", "cacert", "cert", "key", "timeout"} {
				assert.NotNil(t, fl.Lookup(name), "%s --%s", c.CommandPath(), name)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	assert.GreaterOrEqual(t, n, 15, "the verbs with --endpoints")
}

// TestTLSEnvironment: ETCDBOX_CACERT, ETCDBOX_CERT and ETCDBOX_KEY stand
// for the file flags, together; any TLS flag on the command line keeps
// all four variables out; ETCDBOX_PKI with them, or some of them alone,
// are usage errors.
func TestTLSEnvironment(t *testing.T) {
	f := newTLSFixture(t)
	setFiles := func(t *testing.T, cacert, cert, key string) {
		t.Setenv(envCACert, cacert)
		t.Setenv(envCert, cert)
		t.Setenv(envKey, key)
	}
	t.Run("the three variables", func(t *testing.T) {
		setFiles(t, f.cacert, f.cert, f.key)
		out, _, code, err := runExit(t, "status", "--endpoints", f.url)
		require.NoError(t, err)
		assert.Zero(t, code)
		assert.Equal(t, "n1", rowOf(t, out, "n1")[0])
	})
	t.Run("with ETCDBOX_ENDPOINTS", func(t *testing.T) {
		setFiles(t, f.cacert, f.cert, f.key)
		t.Setenv(envEndpoints, f.url)
		_, _, code, err := runExit(t, "status")
		require.NoError(t, err)
		assert.Zero(t, code)
	})
	t.Run("--pki wins", func(t *testing.T) {
		setFiles(t, "/nonexistent/ca", "/nonexistent/cert", "") // partial, and wrong: unread
		_, _, code, err := runExit(t, "status", "--endpoints", f.url, "--pki", f.pkiDir)
		require.NoError(t, err)
		assert.Zero(t, code)
	})
	t.Run("the file flags win over ETCDBOX_PKI", func(t *testing.T) {
		t.Setenv(envPKI, t.TempDir()) // empty: would fail
		_, _, code, err := runExit(t, append([]string{"status", "--endpoints", f.url}, f.fileArgs...)...)
		require.NoError(t, err)
		assert.Zero(t, code)
	})
	t.Run("the file flags win over the variables", func(t *testing.T) {
		setFiles(t, "/nonexistent/ca", "/nonexistent/cert", "/nonexistent/key")
		_, _, code, err := runExit(t, append([]string{"status", "--endpoints", f.url}, f.fileArgs...)...)
		require.NoError(t, err)
		assert.Zero(t, code)
	})
	t.Run("ETCDBOX_PKI and the variables", func(t *testing.T) {
		setFiles(t, f.cacert, f.cert, f.key)
		t.Setenv(envPKI, f.pkiDir)
		_, _, code, err := runExit(t, "status", "--endpoints", f.url)
		assert.Equal(t, exitUsage, code)
		assert.ErrorContains(t, err, "ETCDBOX_PKI and ETCDBOX_CACERT, ETCDBOX_CERT, ETCDBOX_KEY are both set")
	})
	t.Run("some of the variables", func(t *testing.T) {
		setFiles(t, f.cacert, "", f.key)
		_, _, code, err := runExit(t, "status", "--endpoints", f.url)
		assert.Equal(t, exitUsage, code)
		assert.ErrorContains(t, err, "ETCDBOX_CACERT, ETCDBOX_CERT, ETCDBOX_KEY go together: ETCDBOX_CACERT, ETCDBOX_KEY set without ETCDBOX_CERT")
	})
	t.Run("not with --dir", func(t *testing.T) {
		setFiles(t, f.cacert, "", "") // partial, but --dir keeps them out
		_, _, code, err := runExit(t, "status", "--dir", t.TempDir())
		assert.Equal(t, exitError, code)
		assert.ErrorContains(t, err, "state.json is missing")
	})
	t.Run("not with ETCDBOX_DIR", func(t *testing.T) {
		setFiles(t, f.cacert, "", "")
		t.Setenv(envDir, t.TempDir())
		_, _, code, err := runExit(t, "status")
		assert.Equal(t, exitError, code)
		assert.ErrorContains(t, err, "state.json is missing")
	})
	t.Run("seed --pki is another flag", func(t *testing.T) {
		setFiles(t, f.cacert, "", "") // seed has no --cacert: untouched
		_, _, code, err := runExit(t, "seed", "--help")
		require.NoError(t, err)
		assert.Zero(t, code)
	})
}
