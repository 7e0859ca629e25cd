package e2e

import (
	"sync"
	"testing"
)

// How the QEMU tier shares two cores: TestCluster and TestRollingUpgrade
// are not parallel, so each runs alone with its three VMs; then the
// one-VM tests run in two lanes, one VM in each.
//
// A VM has one virtual CPU, so one VM keeps one core busy: a lane that
// ends early leaves a core idle while the other lane finishes. The lanes
// are therefore fixed by the tests' times in `make test`, longest first,
// so that both end together. go test alone cannot do this: it releases
// its parallel tests all at once, in no set order, so `-parallel 2` runs
// them two at a time in a random schedule. Session 5's schedule, with the
// bad slots inside TestPowerCutDuringStaging (641 s) beside the other
// three (367 s together), kept one core idle for four and a half minutes.
//
// Running the roll alongside the one-VM tests was tried (session 5): on
// two cores a one-VM test's boots starved the roll's rebooting node so
// much that its new slot served no linearizable read within the gate's
// 90 s, and the roll rolled back a good image. The overlap would have
// saved about 5 minutes; a false rollback is not worth them.

// The lanes, with each test's time in session 6's first `make test`
// (the lanes ended 6 min 6 s and 4 min 36 s after the roll, with
// TestDiskGrows in the first; it moved).
const (
	// laneSlots: TestBadSlots (the bad slots: four took 5 min 26 s; a fifth,
	// session 34, about a minute) and
	// TestDiskGrows (39 s; it moved here when session 9's leaf renewal
	// made TestSingleNode a minute longer).
	laneSlots = iota
	// lanePower: TestPowerCutDuringStaging (1 min 16 s), TestSingleNode
	// (2 min 16 s, and the renewal's minute; session 37's hang that the
	// chipset's watchdog resets added about 70 s) and TestBadSeed (1 min
	// 17 s). In session 36's make test the lanes ended 5 s apart; with
	// that hang this one ends about a minute after the other, and moving
	// TestPowerCutDuringStaging over would only swap which one.
	lanePower
	numLanes
)

// lanes holds one lock per lane: a one-VM test holds its lane's from its
// start to the end of its cleanups (its VM powered off).
var lanes [numLanes]sync.Mutex

// oneVMTest marks t parallel, a one-VM test run after the cluster tests,
// and waits for its lane. `make test` runs go test with a -parallel above
// the number of one-VM tests, so that the lanes alone decide.
func oneVMTest(t *testing.T, lane int) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("boots a VM; not in -short")
	}
	lanes[lane].Lock()
	t.Cleanup(lanes[lane].Unlock)
}
