package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
)

func TestReadyRSS(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"suffix", "etcdbox: etcd ready (https://10.0.2.15:2379) init rss 22020 KiB", "22020"},
		{"unknown", "etcdbox: etcd ready (https://10.0.2.15:2379) init rss ? KiB", ""},
		{"absent", "etcdbox: etcd ready (https://10.0.2.15:2379)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if m := readyRSS.FindStringSubmatch(tc.line); m != nil {
				got = m[1]
			}
			assert.Equal(t, tc.want, got, "readyRSS in %q", tc.line)
		})
	}
}

func TestReadyPSS(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"parts", "etcdbox: etcd ready (https://10.0.2.15:2379) init rss 30168 KiB (anon 8372, file 4, shmem 21792; pss 19001)", "19001"},
		{"no pss", "etcdbox: etcd ready (https://10.0.2.15:2379) init rss 30168 KiB (anon 8372, file 4, shmem 21792)", ""},
		{"no parts", "etcdbox: etcd ready (https://10.0.2.15:2379) init rss 22020 KiB", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if m := readyPSS.FindStringSubmatch(tc.line); m != nil {
				got = m[1]
			}
			assert.Equal(t, tc.want, got, "readyPSS in %q", tc.line)
		})
	}
}

func TestReport(t *testing.T) {
	s := func(v string, healthy, init time.Duration, rss int64) sample {
		return sample{variant: v, healthy: healthy, kernel: time.Second, init: init, rssKiB: rss, pssKiB: halfOr(rss)}
	}
	var b bytes.Buffer
	report(&b, []sample{
		s("ours", 20*time.Second, 10*time.Second, 100),
		s("floor", 10*time.Second, 5*time.Second, -1),
		s("ours", 22*time.Second, 10*time.Second, 300),
		s("floor", 12*time.Second, 6*time.Second, -1),
	})
	out := b.String()
	assert.Contains(t, out, "ratio ours/floor, boot to healthy (medians): 1.91x")
	assert.Contains(t, out, "ratio ours/floor, /init->healthy (medians):  2.00x")
	assert.Contains(t, out, "init rss once etcd is ready: 200 KiB (min 100 KiB, max 300 KiB, n=2)")
	assert.Contains(t, out, "init pss once etcd is ready (pages shared with etcd counted half): 100 KiB (min 50 KiB, max 150 KiB, n=2)")

	b.Reset()
	report(&b, []sample{s("ours", time.Second, 0, -1)})
	assert.Contains(t, b.String(), "boot to healthy (medians): n/a")
	assert.Contains(t, b.String(), "init rss once etcd is ready: n/a")
	assert.NotContains(t, b.String(), "init pss", "no pss printed")
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(figures.DirEnv, dir)
	s := func(v string, healthy, init time.Duration, rss int64) sample {
		return sample{variant: v, healthy: healthy, kernel: time.Second, init: init, rssKiB: rss, pssKiB: halfOr(rss)}
	}
	require.NoError(t, record(summarise([]sample{
		s("ours", 20*time.Second, 10*time.Second, 2048),
		s("floor", 10*time.Second, 5*time.Second, -1),
	})))
	got, err := figures.Read(dir, "boot")
	require.NoError(t, err)
	by := got.ByKey()
	assert.Equal(t, 2.0, by["boot.init-healthy"].Ratio, "/init->healthy: 10s vs 5s")
	assert.Equal(t, 2.0, by["boot.init-rss"].Value, "2048 KiB in MiB")
	assert.Equal(t, 1.0, by["boot.init-pss"].Value, "1024 KiB in MiB")
	assert.Equal(t, 0.5, by["boot.init-pss"].Ratio, "pss against rss")
	assert.NotContains(t, by, "boot.probe", "no nometa boots")
}

// halfOr is half of an rss sample as its pss, -1 (not printed) for -1.
func halfOr(rss int64) int64 {
	if rss < 0 {
		return -1
	}
	return rss / 2
}
