package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// TestImportDirection enforces DESIGN §1, in one table for the project:
// the init (PID 1 and the container entrypoint) never links the image
// builder, go-diskfs or the OCI layout writer, and the CLI never links
// netlink or the etcd server. (The init's upgrade agent pulls images with
// go-containerregistry's remote, which DESIGN allows; remote itself links
// tarball and mutate.) The packages the init links for its disks and
// modules, and pki, stay on the standard library (and x/sys; storage
// also on the init's reaper).
func TestImportDirection(t *testing.T) {
	const mod = "github.com/etcdbox/etcdbox/"
	for _, tc := range []struct {
		pkg string
		// required is a package the list must show, so it is not vacuous.
		required string
		// forbidden packages (a module path forbids its packages too).
		forbidden []string
		// stdOnly allows only the standard library, the package itself
		// and allowed (path prefixes) beyond it.
		stdOnly bool
		allowed []string
	}{
		{pkg: "./init", required: mod + "init", forbidden: []string{
			"github.com/diskfs/go-diskfs",
			mod + "image",
			"github.com/google/go-containerregistry/pkg/v1/layout",
		}},
		{pkg: "./cmd/etcdbox", required: mod + "image", forbidden: []string{
			"github.com/vishvananda/netlink",
			"go.etcd.io/etcd/server/v3",
			mod + "nodeapi/server", // the CLI is the node API's client
		}},
		{pkg: "./init/slot", required: mod + "init/slot", forbidden: []string{
			"github.com/diskfs/go-diskfs",
			mod + "image",
		}},
		{pkg: "./pki", required: mod + "pki", stdOnly: true},
		// storage runs e2fsprogs through the reaper (supervise.RunTool),
		// whose child output goes through console's line splitter.
		{pkg: "./init/storage", required: mod + "init/storage", stdOnly: true, allowed: []string{"golang.org/x/sys/", mod + "init/supervise", mod + "init/console"}},
		{pkg: "./init/kmod", required: mod + "init/kmod", stdOnly: true, allowed: []string{"golang.org/x/sys/"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", tc.pkg)
			cmd.Dir = testenv.Root(t)
			out, err := cmd.Output()
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			require.NoError(t, err, "go list -deps %s: %s", tc.pkg, stderr)
			var deps []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				dep, std, _ := strings.Cut(line, " ")
				deps = append(deps, dep)
				if tc.stdOnly && std != "true" && dep != tc.required && !hasAnyPrefix(dep, tc.allowed) {
					t.Errorf("%s depends on %s: only the standard library%s is allowed", tc.pkg, dep, strings.Join(append([]string{""}, tc.allowed...), ", "))
				}
				for _, f := range tc.forbidden {
					assert.False(t, dep == f || strings.HasPrefix(dep, f+"/"), "%s imports %s", tc.pkg, dep)
				}
			}
			require.Contains(t, deps, tc.required)
		})
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
