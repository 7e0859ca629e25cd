package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLI runs the CLI in-process and returns its output and exit code.
func runExit(t *testing.T, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), exitCode(err), err
}

// TestExitCodes: 0 for success, 1 for a runtime error, 2 for a usage
// error, an unknown subcommand of any group included.
func TestExitCodes(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"version", []string{"version"}, 0, ""},
		{"help", []string{"--help"}, 0, ""},
		{"a group alone prints its help", []string{"cluster"}, 0, ""},
		{"runtime error", []string{"status", "--dir", empty}, exitError, "state.json is missing"},
		{"unknown command", []string{"statsu"}, exitUsage, `unknown command "statsu" for "etcdbox"; did you mean "status"?`},
		{"unknown cluster subcommand", []string{"cluster", "foo"}, exitUsage, `unknown command "foo" for "etcdbox cluster"`},
		{"unknown pki subcommand", []string{"pki", "foo"}, exitUsage, `unknown command "foo" for "etcdbox pki"`},
		{"mistyped subcommand", []string{"cluster", "stauts"}, exitUsage, `did you mean one of ["start" "status"]?`},
		{"unknown flag", []string{"status", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"bad flag value", []string{"status", "--dir", empty, "--timeout", "soon"}, exitUsage, `invalid argument "soon"`},
		{"missing flag group", []string{"status"}, exitUsage, "at least one of the flags in the group [endpoints dir] is required"},
		{"conflicting flags", []string{"status", "--dir", empty, "--endpoints", "https://127.0.0.1:1"}, exitUsage, "none of the others can be"},
		{"required flag", []string{"pki", "init"}, exitUsage, `required flag(s) "dir" not set`},
		{"extra arguments", []string{"status", "n1"}, exitUsage, `unknown command "n1"`},
		{"unknown seed source", []string{"cluster", "up", "--dir", empty, "--seed-source", "aws"}, exitUsage, `--seed-source: seed source "aws": unknown "aws"`},
		{"two EC2 services", []string{"cluster", "add", "--dir", empty, "--seed-source", "ec2,ec2-imdsv1"}, exitUsage, "ec2 and ec2-imdsv1 are the same protocol"},
		{"unknown image format", []string{"build", "-o", filepath.Join(empty, "x.img"), "--format", "vdi"}, exitUsage, `--format "vdi": unknown; want one of raw, oci, qcow2, vhd, gce, vmdk`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, code, err := runExit(t, tc.args...)
			assert.Equal(t, tc.code, code, "exit code; error: %v", err)
			if tc.message != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.message)
			} else {
				require.NoError(t, err)
				assert.NotEmpty(t, out, "prints something")
			}
		})
	}
}

// TestVersion: `version` and `--version` print the same line, with the
// etcd client version linked in.
func TestVersion(t *testing.T) {
	out, _, code, err := runExit(t, "version")
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Regexp(t, `^etcdbox \S+ \(etcd client 3\.\d+\.\d+, go1\.\d+`, out)
	alt, _, _, err := runExit(t, "--version")
	require.NoError(t, err)
	assert.Equal(t, out, alt)
	assert.Equal(t, 1, strings.Count(out, "\n"))
}
