package slot

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// held returns the Update of a held stage.
func held(kernel, initrd []byte) Update {
	u := update(kernel, initrd, builderOptions)
	u.Hold = true
	return u
}

// TestHoldAndArm stages slot b held, arms it, holds it again and arms it,
// on every backend: a held slot never boots, Arm is one rename, and both
// are idempotent.
func TestHoldAndArm(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys := b.new(t)
			kernel, initrd := blob(20, 40_000), blob(21, 90_000)
			read := func() State {
				t.Helper()
				st, err := Read(fsys)
				require.NoError(t, err)
				return st
			}

			e, err := Stage(fsys, "b", held(kernel, initrd))
			require.NoError(t, err)
			assert.Equal(t, "etcdbox-b+3.held", e.File)
			st := read()
			s := st.Slots["b"]
			require.NotNil(t, s.Held, describe(st))
			assert.Nil(t, s.Entry, "a held slot has no bootable entry")
			assert.Equal(t, Absent, s.Status())
			assert.Equal(t, 2, s.Held.Generation)
			assert.NoError(t, s.Held.Err)
			assert.True(t, s.Kernel && s.Initrd)
			assert.Equal(t, "a", st.Next(), "a held slot does not boot")
			assert.Empty(t, st.Ignored, "the held entry is read, not ignored")
			assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b+3.held"}, entryFiles(t, fsys))

			// Staging it again writes the same.
			_, err = Stage(fsys, "b", held(kernel, initrd))
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b+3.held"}, entryFiles(t, fsys))

			armed, err := Arm(fsys, "b")
			require.NoError(t, err)
			assert.Equal(t, "etcdbox-b+3.conf", armed.File)
			assert.Equal(t, 2, armed.Generation)
			st = read()
			assert.Equal(t, Trying, st.Slots["b"].Status())
			assert.Nil(t, st.Slots["b"].Held)
			assert.Equal(t, "b", st.Next(), "an armed slot boots next")
			noOps(t, fsys, "Arm", func(fsys FS) error { _, err := Arm(fsys, "b"); return err })

			h, err := Hold(fsys, "b")
			require.NoError(t, err)
			assert.Equal(t, "etcdbox-b+3.held", h.File)
			assert.Equal(t, "a", read().Next())
			noOps(t, fsys, "Hold", func(fsys FS) error { _, err := Hold(fsys, "b"); return err })

			_, err = Arm(fsys, "b")
			require.NoError(t, err)
			tryBoot(t, fsys, "b")
			_, err = Hold(fsys, "b")
			assert.ErrorContains(t, err, "only a staged entry that never booted can be held")
			_, err = Arm(fsys, "b")
			assert.ErrorIs(t, err, ErrNotHeld)
			assert.ErrorContains(t, err, "arm slot b")
		})
	}
}

// TestArmRefuses checks what Arm and Hold refuse, each naming why.
func TestArmRefuses(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys := b.new(t)
			_, err := Arm(fsys, "b")
			assert.ErrorIs(t, err, ErrNotHeld, "nothing staged")
			_, err = Hold(fsys, "b")
			assert.ErrorIs(t, err, ErrNoEntry)
			_, err = Arm(fsys, "c")
			assert.ErrorContains(t, err, "unknown slot")

			_, err = Stage(fsys, "b", held(blob(1, 5000), blob(2, 5000)))
			require.NoError(t, err)
			// The held slot lost its initrd: Arm must not make it
			// bootable.
			require.NoError(t, fsys.Remove("etcdbox/b/initrd"))
			_, err = Arm(fsys, "b")
			assert.ErrorContains(t, err, "no complete boot files")
			assert.Equal(t, "a", mustRead(t, fsys).Next())

			// A fallback that is not blessed and complete.
			_, err = Stage(fsys, "b", held(blob(1, 5000), blob(2, 5000)))
			require.NoError(t, err)
			require.NoError(t, fsys.Remove("etcdbox/a/vmlinuz"))
			_, err = Arm(fsys, "b")
			assert.ErrorIs(t, err, ErrNoFallback)
			assert.ErrorContains(t, err, "etcdbox/a/vmlinuz is missing")
		})
	}
}

func mustRead(t *testing.T, fsys FS) State {
	t.Helper()
	st, err := Read(fsys)
	require.NoError(t, err)
	return st
}

// TestHoldArmPowerCut cuts the power at every mutating step of a held
// stage followed by Arm. After every cut the next boot is slot a, unless
// the arming rename went through, and the slot b it then boots is
// complete; running both again finishes the job.
func TestHoldArmPowerCut(t *testing.T) {
	kernel, initrd := blob(30, 20_000), blob(31, 50_000)
	steps := func(fsys FS) error {
		if _, err := Stage(fsys, "b", held(kernel, initrd)); err != nil {
			return err
		}
		_, err := Arm(fsys, "b")
		return err
	}
	for budget := 0; ; budget++ {
		fsys := backends[0].new(t)
		c := &crashFS{FS: fsys, budget: budget}
		err := steps(c)
		if err == nil {
			require.Greater(t, budget, 3, "the steps took some operations")
			break
		}
		require.True(t, errors.Is(err, errPowerCut), "budget %d: %v", budget, err)
		st := mustRead(t, fsys)
		switch st.Next() {
		case "a":
		case "b":
			assert.True(t, st.Slots["b"].Complete(), "budget %d: slot b boots only complete: %s", budget, describe(st))
		default:
			t.Fatalf("budget %d: nothing boots: %s", budget, describe(st))
		}
		require.NoError(t, steps(fsys), "budget %d: the steps run again after the cut", budget)
		st = mustRead(t, fsys)
		assert.Equal(t, "b", st.Next())
		b, err := fsys.ReadFile("etcdbox/b/initrd")
		require.NoError(t, err)
		assert.True(t, bytes.Equal(initrd, b), "budget %d: the initrd is whole", budget)
	}
}
