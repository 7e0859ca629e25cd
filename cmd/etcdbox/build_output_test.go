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
)

// TestBuildOutputs builds one raw image three ways, to a file, to
// standard output (-o -) and onto a loop device (-o /dev/loopN), and
// finds the same bytes in each; -o /dev/null is refused and /dev/null
// stays a character device.
func TestBuildOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds disk images; runs without -short")
	}
	t.Chdir(testenv.Root(t))
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	ctx := context.Background()
	build := func(out string, extra ...string) (stdout, stderr *bytes.Buffer, err error) {
		stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
		// --compression fast: this checks where the bytes go, not the
		// initrd (the image package checks both compressions).
		err = run(ctx, buildArgs(t, append([]string{"-o", out, "--size", "600M", "--compression", "fast"}, extra...)...), stdout, stderr)
		return stdout, stderr, err
	}
	file := filepath.Join(t.TempDir(), "etcdbox.img")
	_, stderr, err := build(file)
	require.NoError(t, err, stderr.String())
	want, err := os.ReadFile(file)
	require.NoError(t, err)

	stdout, stderr, err := build("-")
	require.NoError(t, err, stderr.String())
	assert.True(t, bytes.Equal(want, stdout.Bytes()), "-o - wrote %d bytes, not the %d-byte image", stdout.Len(), len(want))
	assert.Contains(t, stderr.String(), "initrd ", "the report goes to standard error")

	// A blank device larger than the image: written without --force.
	backing := filepath.Join(t.TempDir(), "disk")
	require.NoError(t, os.WriteFile(backing, nil, 0o600))
	require.NoError(t, os.Truncate(backing, 700<<20))
	dev := testenv.Loop(t, backing)
	_, stderr, err = build(dev)
	require.NoError(t, err, stderr.String())
	assert.Contains(t, stderr.String(), "flash "+dev+": verified 600 MiB of 600 MiB (100%)")
	got, err := os.ReadFile(backing)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got[:len(want)]), "the device does not hold the image")

	// Now it holds an image: not blank, so it takes --force.
	_, _, err = build(dev)
	require.ErrorContains(t, err, "flash "+dev+": not blank: it holds a GPT partition table; --force overwrites it")
	_, stderr, err = build(dev, "--force")
	require.NoError(t, err, stderr.String())
	_, _, err = build(dev, "--format", "oci")
	require.ErrorContains(t, err, "a block device takes a raw disk image, not --format oci")

	_, _, err = build("/dev/null")
	require.ErrorContains(t, err, "/dev/null: is a character device, not a regular file; refusing to replace it")
	fi, err := os.Stat("/dev/null")
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeCharDevice, "/dev/null was replaced")
	_, _, err = build(file, "--force")
	require.ErrorContains(t, err, "--force is for -o with a block device")
}
