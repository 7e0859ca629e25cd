package slot

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeps keeps the init small: this package is linked into it and must
// not pull in go-diskfs or the image builder (its tests may).
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
	require.NoError(t, err)
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err, "go list -deps")
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/etcdbox/etcdbox/init/slot")
	for _, dep := range deps {
		for _, banned := range []string{"github.com/diskfs/go-diskfs", "github.com/etcdbox/etcdbox/image"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("init/slot depends on %s", dep)
			}
		}
	}
}
