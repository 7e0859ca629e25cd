package seed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// TestExtraArgFlagsExistInEtcd runs the etcd that the project builds (the
// version go.mod pins) with --help: every flag etcd.extraArgs allows, and
// every feature gate, must be one it has, so that the allow-list cannot
// drift from the pinned etcd. Each refused flag that names a real flag is
// checked too, so that a renamed flag is noticed.
func TestExtraArgFlagsExistInEtcd(t *testing.T) {
	etcd := testenv.Bin(t, "etcd")
	mod, err := os.ReadFile(filepath.Join(testenv.Root(t), "go.mod"))
	require.NoError(t, err)
	pin := regexp.MustCompile(`go\.etcd\.io/etcd/server/v3 v(\S+)`).FindSubmatch(mod)
	require.NotNil(t, pin, "go.mod pins no etcd server")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	version, err := exec.CommandContext(ctx, etcd, "--version").Output()
	require.NoError(t, err)
	assert.Contains(t, string(version), "etcd Version: "+string(pin[1])+"\n", "bin/etcd is not the pinned etcd")
	help, err := exec.CommandContext(ctx, etcd, "--help").CombinedOutput()
	require.NoError(t, err, "%s", help)

	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (?:etcd )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	require.Greater(t, len(flags), 100, "etcd --help lists its flags:\n%s", help)
	for _, f := range ExtraArgFlags() {
		assert.True(t, flags[f], "--%s is allowed in etcd.extraArgs, but etcd %s has no such flag", f, pin[1])
	}
	for _, g := range append(FeatureGates, "InitialCorruptCheck", "CompactHashCheck") {
		assert.True(t, strings.Contains(string(help), "\n    "+g+"=true|false"), "feature gate %s is not among etcd %s's", g, pin[1])
	}
	refused := append(append([]string{}, securityFlags...), ownedFlags...)
	for f := range ownKeys {
		refused = append(refused, f)
	}
	for _, f := range refused {
		assert.True(t, flags[f], "--%s is refused by name, but etcd %s has no such flag", f, pin[1])
		assert.NotContains(t, extraArgFlags, f)
	}
}

// TestExtraArgsRefuseEveryOtherEtcdFlag: each flag etcd --help lists is
// either allowed or refused with a reason; none that weakens TLS, names a
// URL or file, or is unsafe is allowed.
func TestExtraArgsRefuseEveryOtherEtcdFlag(t *testing.T) {
	help, err := exec.Command(testenv.Bin(t, "etcd"), "--help").CombinedOutput()
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)^  (?:etcd )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		name := m[1]
		if _, ok := extraArgFlags[name]; ok {
			for _, bad := range []string{"tls", "cert", "insecure", "unsafe", "url", "file", "listen", "auth"} {
				assert.NotContains(t, name, bad, "--%s is allowed", name)
			}
			continue
		}
		var p problems
		p.extraArgs([]string{"--" + name + "=x"})
		require.Error(t, p.err(), "--%s", name)
		assert.Contains(t, p.err().Error(), "--"+name+": ", "refused by name")
	}
}

func TestParseEtcdTuning(t *testing.T) {
	f := newFixture(t)
	s, err := Parse([]byte(`cluster: demo
etcd:
  logLevel: warn
  autoCompactionMode: revision
  autoCompactionRetention: "10000"
  metricsPort: 2381
  extraArgs:
    - --heartbeat-interval=250
    - --election-timeout=2500
    - --max-request-bytes=10485760
    - --grpc-keepalive-timeout=10s
    - --feature-gates=StopGRPCServiceOnDefrag=true,LeaseCheckpoint=true
    - --metrics=extensive
` + f.issuing()))
	require.NoError(t, err)
	assert.Equal(t, "warn", s.Etcd.LogLevel)
	assert.Equal(t, CompactionRevision, s.Etcd.AutoCompactionMode)
	assert.Equal(t, "10000", s.Etcd.AutoCompactionRetention, "no duration default in revision mode")
	assert.Equal(t, 2381, s.Etcd.MetricsPort)
	assert.Len(t, s.Etcd.ExtraArgs, 6)
	assert.Equal(t, "--feature-gates=StopGRPCServiceOnDefrag=true,LeaseCheckpoint=true", s.Etcd.ExtraArgs[4])

	// Marshal keeps them, and Parse reads them back.
	data, err := s.Marshal()
	require.NoError(t, err)
	back, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, s, back)

	s, err = Parse([]byte("cluster: demo\n" + f.issuing()))
	require.NoError(t, err)
	assert.Equal(t, "1h", s.Etcd.AutoCompactionRetention, "periodic, 1h, by default")
	assert.Empty(t, s.Etcd.AutoCompactionMode+s.Etcd.LogLevel+strings.Join(s.Etcd.ExtraArgs, ""))
}
