package e2e

import "testing"

// How the QEMU tier shares two cores: TestCluster and TestRollingUpgrade
// are not parallel, so each runs alone with its three VMs; then the
// one-VM tests run two at a time (go test's -parallel, 2 in `make test`).
//
// Running the roll alongside the one-VM tests was tried (session 5): on
// two cores a one-VM test's boots starved the roll's rebooting node so
// much that its new slot served no linearizable read within the gate's
// 90 s, and the roll rolled back a good image. The overlap would have
// saved about 5 minutes; a false rollback is not worth them.

// oneVMTest marks t parallel: a one-VM test, run after the cluster tests.
func oneVMTest(t *testing.T) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("boots a VM; not in -short")
	}
}
