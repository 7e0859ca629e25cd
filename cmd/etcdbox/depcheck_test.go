package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// TestImportDirection enforces DESIGN §1: the init (PID 1 and the
// container entrypoint) never links the image builder, go-diskfs or the
// OCI layout writer, and the CLI never links netlink or the etcd server.
// (The init's upgrade agent pulls images with go-containerregistry's
// remote, which DESIGN allows; remote itself links tarball and mutate.)
func TestImportDirection(t *testing.T) {
	for _, tc := range []struct {
		pkg       string
		required  string // a package the list must show, so it is not vacuous
		forbidden []string
	}{
		{"./init", "github.com/etcdbox/etcdbox/init", []string{
			"github.com/diskfs/go-diskfs",
			"github.com/etcdbox/etcdbox/image",
			"github.com/google/go-containerregistry/pkg/v1/layout",
		}},
		{"./cmd/etcdbox", "github.com/etcdbox/etcdbox/image", []string{
			"github.com/vishvananda/netlink",
			"go.etcd.io/etcd/server/v3",
		}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", tc.pkg)
			cmd.Dir = testenv.Root(t)
			out, err := cmd.Output()
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			require.NoError(t, err, "go list -deps %s: %s", tc.pkg, stderr)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, tc.required)
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					// A module path forbids its packages too.
					assert.False(t, dep == f || strings.HasPrefix(dep, f+"/"), "%s imports %s", tc.pkg, dep)
				}
			}
		})
	}
}
