package seed

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{
			name: "proc cmdline",
			in:   "BOOT_IMAGE=/etcdbox/a/vmlinuz console=ttyS0,115200 panic=10 etcdbox.slot=a quiet\n",
			want: map[string]string{"BOOT_IMAGE": "/etcdbox/a/vmlinuz", "console": "ttyS0,115200", "panic": "10", "etcdbox.slot": "a", "quiet": ""},
		},
		{name: "quoted value", in: `a="x y" b=1`, want: map[string]string{"a": "x y", "b": "1"}},
		{name: "quoted parameter", in: `"a=x y"  b`, want: map[string]string{"a": "x y", "b": ""}},
		{name: "quote in the middle", in: `a=x" y "z`, want: map[string]string{"a": "x y z"}},
		{name: "empty quotes", in: `a="" b`, want: map[string]string{"a": "", "b": ""}},
		{name: "unterminated quote", in: `a="x y`, want: map[string]string{"a": "x y"}},
		{name: "value with equals", in: "etcdbox.seed=Y2x1c3Rlcjog==", want: map[string]string{"etcdbox.seed": "Y2x1c3Rlcjog=="}},
		{name: "last wins", in: "a=1 a=2", want: map[string]string{"a": "2"}},
		{name: "init arguments", in: "a=1 -- b=2", want: map[string]string{"a": "1", "b": "2"}},
		{name: "whitespace", in: "\t a=1 \n\n b=2\t", want: map[string]string{"a": "1", "b": "2"}},
		{name: "no key", in: "=x a", want: map[string]string{"a": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseCmdline(tt.in), "ParseCmdline(%q)", tt.in)
		})
	}
}

func TestFromCmdline(t *testing.T) {
	// These bytes make '+' and '/' in standard base64 and '-' and '_' in
	// the URL alphabet, with padding.
	seed := []byte("cluster: demo\n# \xfb\xff\xbe?>\n")
	require.Contains(t, base64.StdEncoding.EncodeToString(seed), "/")
	require.Contains(t, base64.StdEncoding.EncodeToString(seed), "=")

	good := []struct {
		name, enc string
	}{
		{"std", base64.StdEncoding.EncodeToString(seed)},
		{"std raw", base64.RawStdEncoding.EncodeToString(seed)},
		{"url", base64.URLEncoding.EncodeToString(seed)},
		{"url raw", base64.RawURLEncoding.EncodeToString(seed)},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := FromCmdline("console=ttyS0 etcdbox.seed=" + tt.enc + " panic=10")
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, seed, got)
		})
	}

	t.Run("absent", func(t *testing.T) {
		got, ok, err := FromCmdline("console=ttyS0 etcdbox.slot=a")
		assert.NoError(t, err)
		assert.False(t, ok)
		assert.Nil(t, got)
	})

	bad := []struct {
		name, in, want string
	}{
		{"empty", "etcdbox.seed=", "etcdbox.seed: empty value"},
		{"flag only", "etcdbox.seed", "etcdbox.seed: empty value"},
		{"padding only", "etcdbox.seed==", "etcdbox.seed: empty value"},
		{"not base64", "etcdbox.seed=cluster:demo", "etcdbox.seed: invalid base64"},
		{"mixed alphabets", "etcdbox.seed=ab+_", "etcdbox.seed: invalid base64"},
		{"truncated", "etcdbox.seed=Y2x1c3RlcjogZGVtb", "etcdbox.seed: invalid base64"},
		{"seed URL", "etcdbox.seed=https://seed.example/n1", "etcdbox.seed: seed URLs are not supported yet"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := FromCmdline(tt.in)
			assert.True(t, ok, "present")
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestFromCmdlineParses(t *testing.T) {
	f := newFixture(t)
	in := &Seed{Cluster: "demo", PKI: PKI{CACert: f.caCert, CAKey: f.caKey}}
	data, err := in.Marshal()
	require.NoError(t, err)
	cmdline := "console=ttyS0,115200 etcdbox.slot=a etcdbox.seed=" + base64.RawURLEncoding.EncodeToString(data)

	got, ok, err := FromCmdline(cmdline)
	require.NoError(t, err)
	require.True(t, ok)
	s, err := Parse(got)
	require.NoError(t, err)
	assert.Equal(t, "demo", s.Cluster)
	assert.Equal(t, f.caKey, s.PKI.CAKey)
	t.Logf("cmdline with a CA seed: %d bytes", len(cmdline))
}

// TestCmdlineGzip: a seed with a node CA is over the kernel's 2047 bytes
// as plain base64 and under them gzipped; FromCmdline reads it back.
func TestCmdlineGzip(t *testing.T) {
	ca, err := pki.NewCA("etcdbox-ca", 24*time.Hour)
	require.NoError(t, err)
	p, _, err := IssuingPKI(ca, pki.NodeScope{Domains: []string{"etcd.example.internal"}})
	require.NoError(t, err)
	in := &Seed{Cluster: "prod", Discovery: Discovery{SRV: "etcd.example.internal", InitialSize: 3}, PKI: p}
	data, err := in.Marshal()
	require.NoError(t, err)

	arg, err := Cmdline(data)
	require.NoError(t, err)
	plain := CmdlineKey + "=" + base64.RawStdEncoding.EncodeToString(data)
	t.Logf("seed with a node CA: %d bytes of YAML; on the command line %d bytes plain, %d gzipped", len(data), len(plain), len(arg))
	assert.Greater(t, len(plain), 2047, "plain base64 would be cut off by the kernel")
	assert.Less(t, len(arg), 2047-len("console=ttyS0,115200 panic=10 etcdbox.slot=a "), "gzipped, it fits beside the builder's arguments")

	got, ok, err := FromCmdline("console=ttyS0 " + arg + " panic=10")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, data, got)
	s, err := Parse(got)
	require.NoError(t, err)
	assert.Equal(t, p.NodeCAKey, s.PKI.NodeCAKey)
}

// TestCmdlineGzipBad: a gzip stream that is cut, empty, or expands past
// MaxSize is an error that names the parameter.
func TestCmdlineGzipBad(t *testing.T) {
	arg, err := Cmdline([]byte("cluster: demo\n"))
	require.NoError(t, err)
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(arg, CmdlineKey+"="))
	require.NoError(t, err)
	empty, err := Cmdline(nil)
	require.NoError(t, err)
	var bomb bytes.Buffer
	z := gzip.NewWriter(&bomb)
	_, err = z.Write(make([]byte, MaxSize+1))
	require.NoError(t, err)
	require.NoError(t, z.Close())
	for _, tt := range []struct{ name, in, want string }{
		{"cut", CmdlineKey + "=" + base64.RawStdEncoding.EncodeToString(raw[:len(raw)-6]), "etcdbox.seed: gzip"},
		{"empty", empty, "etcdbox.seed: gzip: empty seed"},
		{"bomb", CmdlineKey + "=" + base64.RawStdEncoding.EncodeToString(bomb.Bytes()), "seed too large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := FromCmdline(tt.in)
			assert.True(t, ok)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
