package pki

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStdlibOnly keeps pki on the standard library: the PID-1 init links it.
func TestStdlibOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Equal(t, []string{"github.com/etcdbox/etcdbox/pki"}, deps, "pki must depend on the standard library only")
}
