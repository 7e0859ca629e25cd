package testenv

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Etcdctl runs bin/etcdctl with args against endpoint, authenticated by
// the admin certificate of pkiDir (pki.Init's ca.crt, admin.crt and
// admin.key). Each request gets 10s, the whole command 30s. It returns
// etcdctl's stdout and stderr together, trimmed, and its error, so that a
// test can report what etcdctl said or assert that it failed.
//
// The file names are spelled out rather than taken from package pki: the
// tests of every package, pki's included, may import testenv.
func Etcdctl(tb testing.TB, pkiDir, endpoint string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{
		"--endpoints=" + endpoint,
		"--cacert=" + filepath.Join(pkiDir, "ca.crt"),
		"--cert=" + filepath.Join(pkiDir, "admin.crt"),
		"--key=" + filepath.Join(pkiDir, "admin.key"),
		"--command-timeout=10s",
	}, args...)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, Bin(tb, "etcdctl"), full...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}
