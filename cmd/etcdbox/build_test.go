package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/seed"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		wantErr  bool
	}{
		{name: "bytes", in: "606076928", want: 606076928},
		{name: "G", in: "1G", want: 1 << 30},
		{name: "GiB", in: "2GiB", want: 2 << 30},
		{name: "lower case M", in: "600m", want: 600 << 20},
		{name: "MB", in: "578MB", want: 578 << 20},
		{name: "K", in: "4K", want: 4 << 10},
		{name: "empty", in: "", wantErr: true},
		{name: "zero", in: "0", wantErr: true},
		{name: "negative", in: "-1G", wantErr: true},
		{name: "junk", in: "big", wantErr: true},
		{name: "overflow", in: "99999999999T", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if tc.wantErr {
				assert.Error(t, err, "parseSize(%q) = %d", tc.in, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "parseSize(%q)", tc.in)
		})
	}
}

// buildArgs returns `etcdbox build` arguments with explicit binaries: in
// a test, "next to the etcdbox binary" is the test binary's directory.
func buildArgs(t *testing.T, extra ...string) []string {
	return append([]string{"build", "--etcd", testenv.Bin(t, "etcd"), "--init", testenv.Bin(t, "etcdctl")}, extra...)
}

func TestBuildCommandErrors(t *testing.T) {
	t.Chdir(testenv.Root(t)) // the defaults find .cache/sysroot
	vmlinuz, _ := testenv.Kernel(t)
	for _, tc := range []struct {
		name string
		args func(out string) []string
		env  string // SOURCE_DATE_EPOCH
		want []string
	}{
		{name: "unknown format", args: func(out string) []string { return buildArgs(t, "-o", out, "--format", "qcow3") },
			want: []string{`"qcow3"`}},
		{name: "unknown compression", args: func(out string) []string { return buildArgs(t, "-o", out, "--compression", "xz") },
			want: []string{`--compression "xz"`, "small", "fast"}},
		{name: "zstd program missing", args: func(out string) []string { return buildArgs(t, "-o", out, "--zstd", "/nonexistent/zstd") },
			want: []string{"zstd program /nonexistent/zstd"}},
		{name: "size too small", args: func(out string) []string { return buildArgs(t, "-o", out, "--size", "100M") },
			want: []string{"--size 100M", "578 MiB"}},
		{name: "size unparsable", args: func(out string) []string { return buildArgs(t, "-o", out, "--size", "huge") },
			want: []string{"--size huge"}},
		{name: "missing kernel", args: func(out string) []string {
			return buildArgs(t, "-o", out, "--kernel", "/nonexistent/vmlinuz-6.1.0-57-amd64")
		}, want: []string{"/nonexistent/vmlinuz-6.1.0-57-amd64"}},
		{name: "kernel without modules", args: func(out string) []string {
			return buildArgs(t, "-o", out, "--kernel", vmlinuz, "--modules", "/nonexistent/modules")
		}, want: []string{"modules", "/nonexistent/modules"}},
		{name: "missing e2fsprogs", args: func(out string) []string {
			return buildArgs(t, "-o", out, "--format", "oci", "--push", "127.0.0.1:1/a:b", "--tools-root", "/nonexistent")
		}, want: []string{"mke2fs", "/nonexistent"}},
		{name: "raw cannot be pushed", args: func(out string) []string { return buildArgs(t, "-o", out, "--push", "127.0.0.1:1/a:b") },
			want: []string{"push", "127.0.0.1:1/a:b"}},
		{name: "no output", args: func(string) []string { return buildArgs(t) }, want: []string{"--output"}},
		{name: "default init missing", args: func(out string) []string { return []string{"build", "-o", out} },
			want: []string{"--init"}},
		{name: "an init that does not carry etcd, and no --etcd", args: func(out string) []string {
			return []string{"build", "-o", out, "--init", testenv.Bin(t, "etcdctl")}
		}, want: []string{"does not carry etcd", testenv.Bin(t, "etcdctl"), "give an etcd binary"}},
		{name: "bad seed", args: func(out string) []string {
			seed := filepath.Join(t.TempDir(), "seed.yaml")
			require.NoError(t, os.WriteFile(seed, []byte("cluster: demo\netcd:\n  clientPortt: 1\n"), 0o600))
			return buildArgs(t, "-o", out, "--seed", seed)
		}, want: []string{"--seed", "etcd.clientPortt"}},
		{name: "a CA key in an OCI image", args: func(out string) []string {
			return buildArgs(t, "-o", out+".tar", "--format", "oci", "--seed", caKeySeed(t))
		}, want: []string{"pki.nodeCAKey", "OCI image goes to registries"}},
		{name: "a CA key pushed", args: func(out string) []string {
			return buildArgs(t, "--format", "oci", "--push", "127.0.0.1:1/a:b", "--seed", caKeySeed(t))
		}, want: []string{"pki.nodeCAKey"}},
		{name: "a CA key on an OCI image's command line", args: func(out string) []string {
			return buildArgs(t, "-o", out+".tar", "--format", "oci", "--cmdline", "quiet "+cmdlineSeed(t, caKeySeed(t)))
		}, want: []string{"--cmdline etcdbox.seed= holds pki.nodeCAKey", "OCI image goes to registries"}},
		{name: "a bad command-line seed", args: func(out string) []string {
			return buildArgs(t, "-o", out, "--cmdline", "etcdbox.seed=not*base64")
		}, want: []string{"--cmdline: etcdbox.seed: invalid base64"}},
		{name: "a driver that is not a module name", args: func(out string) []string { return buildArgs(t, "-o", out, "--driver", "igb,../evil") },
			want: []string{`--driver "../evil"`, "not a kernel module's name"}},
		{name: "a driver the kernel does not have", args: func(out string) []string { return buildArgs(t, "-o", out, "--driver", "no_such_driver") },
			want: []string{"modules not found", "no_such_driver"}},
		{name: "bad SOURCE_DATE_EPOCH", args: func(out string) []string { return buildArgs(t, "-o", out) }, env: "yesterday",
			want: []string{"SOURCE_DATE_EPOCH", "yesterday"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("SOURCE_DATE_EPOCH", tc.env)
			}
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args(filepath.Join(dir, "etcdbox.img")), &stdout, &stderr)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "output left behind")
		})
	}
}

// caKeySeed writes a seed that carries a node CA's key, as `etcdbox seed
// --pki` makes it, and returns its path.
func caKeySeed(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"pki", "init", "--dir", filepath.Join(dir, "pki")}, &out, &errb), errb.String())
	seed := filepath.Join(dir, "seed.yaml")
	require.NoError(t, run(context.Background(), []string{"seed", "--cluster", "demo", "--pki", filepath.Join(dir, "pki"), "--srv", "etcd.example.internal", "--initial-size", "3", "-o", seed}, &out, &errb), errb.String())
	b, err := os.ReadFile(seed)
	require.NoError(t, err)
	require.Contains(t, string(b), "nodeCAKey", "the seed carries the node CA key")
	return seed
}

// cmdlineSeed is the etcdbox.seed= argument of the seed file at path:
// gzipped, as `etcdbox seed -o X.cmdline` writes it, since a node CA
// seed in plain base64 is over x86's 2047-byte command line.
func cmdlineSeed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	arg, err := seed.Cmdline(b)
	require.NoError(t, err)
	return arg
}

// TestBuildCommand builds a raw disk through the CLI with the default
// kernel, modules and bootloader (the cache) and a custom size.
func TestBuildCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a disk image; runs without -short")
	}
	t.Chdir(testenv.Root(t))
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out := filepath.Join(t.TempDir(), "etcdbox.img")
	var stdout, stderr bytes.Buffer
	seed := caKeySeed(t)
	err := run(context.Background(), buildArgs(t, "-o", out, "--size", "600M", "--compression", "fast", "--cmdline", "etcdbox.debug=1 "+cmdlineSeed(t, seed), "--seed", seed,
		"--driver", "igb", "--driver", "it87_wdt"), &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "wrote "+out+" (raw)")
	assert.Regexp(t, `[0-9]+ modules \(the default set and igb, it87_wdt\)`, stdout.String())
	// A raw disk for one machine may carry the CA key, with a warning;
	// on the command line, with another: the console shows it.
	assert.Contains(t, stderr.String(), "warning: --seed "+seed+" holds pki.nodeCAKey")
	assert.Contains(t, stderr.String(), "warning: --cmdline etcdbox.seed= holds pki.nodeCAKey: the kernel prints it on the console")
	fi, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, int64(600<<20), fi.Size())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "an image with a baked seed (a private key) is its owner's only")
}
