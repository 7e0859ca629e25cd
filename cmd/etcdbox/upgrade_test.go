package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

func TestUpgradeFlagErrors(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	const ref = "10.88.0.1:5000/etcdbox@sha256:0123456789012345678901234567890123456789012345678901234567890123"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing to do", []string{"upgrade", "--dir", "x"}, "at least one of the flags in the group [image status abort] is required"},
		{"no nodes", []string{"upgrade", "--image", ref}, "at least one of the flags in the group [endpoints dir] is required"},
		{"both modes", []string{"upgrade", "--image", ref, "--status", "--dir", "d"}, "if any flags in the group [image status abort] are set none of the others can be"},
		{"endpoints and dir", []string{"upgrade", "--image", ref, "--endpoints", "a", "--dir", "d"}, "if any flags in the group [endpoints dir] are set none of the others can be"},
		{"tag only", []string{"upgrade", "--image", "10.88.0.1:5000/etcdbox:v2", "--endpoints", "a", "--pki", pkiDir}, `image "10.88.0.1:5000/etcdbox:v2": no digest`},
		{"no pki", []string{"upgrade", "--image", ref, "--endpoints", "a"}, "--pki is required with --endpoints"},
		{"etcd endpoints count", []string{"upgrade", "--image", ref, "--endpoints", "a,b", "--etcd-endpoints", "https://a:2379", "--pki", pkiDir}, "--etcd-endpoints names 1 endpoints and --endpoints 2"},
		{"bad endpoint", []string{"upgrade", "--image", ref, "--endpoints", "http://a", "--pki", pkiDir}, `node API endpoint "http://a": scheme "http", want https`},
		{"no cluster", []string{"upgrade", "--status", "--dir", t.TempDir()}, "no cluster"},
		{"cluster upgrade needs dir", []string{"cluster", "upgrade", "--image", ref}, `required flag(s) "dir" not set`},
		{"no such pki", []string{"upgrade", "--abort", "--endpoints", "a", "--pki", t.TempDir()}, "load admin certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out, &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPrintRollStatus(t *testing.T) {
	var out bytes.Buffer
	printRollStatus(&out, rollout.Status{})
	assert.Equal(t, "target: none\n", out.String())
	out.Reset()
	printRollStatus(&out, rollout.Status{
		Target:  &rollout.Target{Image: "r/etcdbox@sha256:1", By: "ops@host", Etcd: "3.7.3"},
		Records: []rollout.NodeRecord{{Name: "n2", State: rollout.StateRolledBack, From: "a", To: "b", Image: "r/etcdbox@sha256:1", Error: "slot b: gate failed"}},
	})
	assert.Contains(t, out.String(), "target: r/etcdbox@sha256:1 (started 0001-01-01T00:00:00Z by ops@host, etcd 3.7.3)\n")
	assert.Contains(t, out.String(), "n2    rolled-back  a->b")
	assert.Contains(t, out.String(), "slot b: gate failed")
}
