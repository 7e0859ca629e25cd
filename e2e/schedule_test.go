package e2e

import "testing"

// How the QEMU tier shares two cores (`make test` runs go test with
// -parallel 8, so that go test itself never holds a test back; these
// helpers do the scheduling):
//
//   - TestCluster is not parallel: it runs first, alone, with its three
//     VMs and its faults;
//   - then TestRollingUpgrade (three VMs, mostly idle between reboots)
//     runs alongside the one-VM tests, which take turns: one VM at a
//     time, so that no more than four VMs share the two cores.
//
// Two one-VM tests at a time after the roll, as before, cost the roll's
// whole length on top; this overlap costs each test some speed instead.

// oneVM is the turn of the one-VM tests.
var oneVM = make(chan struct{}, 1)

// oneVMTest marks t parallel and waits for the one-VM turn, which it
// keeps until t ends.
func oneVMTest(t *testing.T) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("boots a VM; not in -short")
	}
	select {
	case oneVM <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("the one-VM turn never came")
	}
	t.Cleanup(func() { <-oneVM })
}
