package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeQEMU puts a qemu-system-x86_64 first in PATH that runs script (sh)
// and counts its runs in the returned file.
func fakeQEMU(t *testing.T, script string) (runs string) {
	t.Helper()
	dir := t.TempDir()
	runs = filepath.Join(dir, "runs")
	body := "#!/bin/sh\necho run >> " + runs + "\n" + script + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, qemuBinary), []byte(body), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return runs
}

func countRuns(t *testing.T, runs string) int {
	b, err := os.ReadFile(runs)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "run\n")
}

// testProber has a device that opens, a kernel file, and a cache of its own.
func testProber(t *testing.T) Prober {
	dir := t.TempDir()
	dev := filepath.Join(dir, "kvm")
	kernel := filepath.Join(dir, "vmlinuz")
	boot := filepath.Join(dir, "boot_id")
	for _, f := range []string{dev, kernel} {
		require.NoError(t, os.WriteFile(f, nil, 0o644))
	}
	require.NoError(t, os.WriteFile(boot, []byte("boot-1\n"), 0o644))
	return Prober{Device: dev, Kernel: kernel, Timeout: 2 * time.Second,
		CacheFile: filepath.Join(dir, "cache", "accel.json"), BootIDFile: boot}
}

func TestProbeDecision(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		noDevice     bool
		noKernel     bool
		want         string
		reason       string
	}{
		{name: "guest signalled", script: `echo "[    0.9] Kernel panic - not syncing: VFS: Unable to mount root fs"; exit 0`,
			want: AccelKVM, reason: "reached its kernel panic"},
		{name: "guest never runs", script: `echo "Probing EDD (edd=off to disable)... ok"; sleep 30`,
			want: AccelTCG, reason: "kvm opened, but a test guest did not run within 2s"},
		{name: "qemu fails", script: `echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2; exit 134`,
			want: AccelTCG, reason: "failed to set MSR"},
		{name: "exits without a panic", script: `exit 0`, want: AccelTCG, reason: "the test guest failed"},
		{name: "no device", noDevice: true, script: `exit 0`, want: AccelTCG, reason: "no "},
		{name: "no kernel", noKernel: true, script: `exit 0`, want: AccelTCG, reason: "no kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeQEMU(t, tc.script)
			p := testProber(t)
			p.CacheFile = "-"
			if tc.noDevice {
				p.Device = filepath.Join(t.TempDir(), "missing")
			}
			if tc.noKernel {
				p.Kernel = ""
				t.Setenv("ETCDBOX_CACHE", t.TempDir())
				p = p.withDefaults()
				if p.Kernel != "" {
					t.Skip("this machine has a kernel FindKernel finds")
				}
			}
			start := time.Now()
			c := p.Probe(context.Background())
			assert.Equal(t, tc.want, c.Accel, "Probe() = %+v", c)
			assert.Contains(t, c.Reason, tc.reason)
			assert.Less(t, time.Since(start), 10*time.Second, "the probe outlived its timeout")
			assert.True(t, strings.HasPrefix(c.String(), "accelerator: "+tc.want+" ("), c.String())
		})
	}
}

func TestProbeCache(t *testing.T) {
	runs := fakeQEMU(t, `echo "Kernel panic - not syncing"; exit 0`)
	p := testProber(t)
	ctx := context.Background()

	c := p.Probe(ctx)
	require.Equal(t, AccelKVM, c.Accel)
	require.Equal(t, 1, countRuns(t, runs))

	c = p.Probe(ctx)
	assert.Equal(t, AccelKVM, c.Accel)
	assert.Contains(t, c.Reason, "cached for this host boot")
	assert.Equal(t, 1, countRuns(t, runs), "the second probe of one host boot ran QEMU")

	// A new host boot probes again.
	require.NoError(t, os.WriteFile(p.BootIDFile, []byte("boot-2\n"), 0o644))
	c = p.Probe(ctx)
	assert.NotContains(t, c.Reason, "cached")
	assert.Equal(t, 2, countRuns(t, runs))

	// A cache that is garbage is ignored, not trusted.
	require.NoError(t, os.WriteFile(p.CacheFile, []byte("{not json"), 0o644))
	c = p.Probe(ctx)
	assert.Equal(t, AccelKVM, c.Accel)
	assert.Equal(t, 3, countRuns(t, runs))

	// An interrupted probe is not cached.
	require.NoError(t, os.WriteFile(p.BootIDFile, []byte("boot-3\n"), 0o644))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p.Probe(cctx) // QEMU does not even start
	c = p.Probe(ctx)
	assert.NotContains(t, c.Reason, "cached", "an interrupted probe's answer was cached")
	assert.Equal(t, 4, countRuns(t, runs))
}

func TestChooseAccel(t *testing.T) {
	probed := Choice{Accel: AccelTCG, Reason: "probed", Probed: true}
	probe := func(context.Context) Choice { return probed }
	for _, tc := range []struct {
		name, flag, env string
		want, reason    string
		err             string
	}{
		{name: "nothing set probes", want: AccelTCG, reason: "probed"},
		{name: "auto probes", flag: "auto", env: "auto", want: AccelTCG, reason: "probed"},
		{name: "flag", flag: "kvm", want: AccelKVM, reason: "set by --accel kvm"},
		{name: "env", env: "kvm", want: AccelKVM, reason: "set by ETCDBOX_ACCEL=kvm"},
		{name: "flag wins over env", flag: "tcg", env: "kvm", want: AccelTCG, reason: "--accel tcg"},
		{name: "auto flag leaves env", flag: "auto", env: "kvm", want: AccelKVM, reason: "ETCDBOX_ACCEL=kvm"},
		{name: "bad flag", flag: "hvf", err: `accel "hvf": want auto, kvm or tcg`},
		{name: "bad env", env: "KVM", err: `ETCDBOX_ACCEL "KVM": want auto, kvm or tcg`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := chooseAccel(context.Background(), tc.flag, tc.env, probe)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Accel)
			assert.Contains(t, c.Reason, tc.reason)
		})
	}
}

// TestProbeMatchesABoot runs the probe on this machine, without its
// cache, and checks its answer against a real boot of the same kernel
// under KVM given four times as long: KVM is chosen exactly when that
// boot reaches the kernel's panic.
func TestProbeMatchesABoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU; runs without -short")
	}
	kernel := FindKernel()
	if kernel == "" {
		t.Fatal("no kernel for the probe: run hack/deps.sh")
	}
	p := Prober{CacheFile: "-", Kernel: kernel}
	c := p.Probe(context.Background())
	t.Logf("%s (probe took %s, kernel %s)", c, c.Took.Round(time.Millisecond), kernel)

	long := Prober{CacheFile: "-", Kernel: kernel, Timeout: 4 * DefaultProbeTimeout}
	boot := long.withDefaults().probe(context.Background())
	t.Logf("the long boot: %s", boot)
	assert.Equal(t, boot.Accel == AccelKVM, c.Accel == AccelKVM, "probe: %s; a boot given %s: %s", c, long.Timeout, boot)

	// The fallback works: the same kernel boots to its panic under TCG.
	soft := Prober{CacheFile: "-", Kernel: kernel, Timeout: 60 * time.Second, tcg: true}
	tb := soft.withDefaults().probe(context.Background())
	t.Logf("under tcg: %s", tb)
	assert.Equal(t, AccelTCG, tb.Accel)
	assert.Contains(t, tb.Reason, "a test guest ran under tcg and reached its kernel panic")
}
