package slot

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdBootNext is the name systemd-boot gives a counted entry right before
// it boots it, written from its documented rule independently of Name:
// "+LEFT[-DONE]" becomes "+(LEFT-1, not below 0)-(DONE+1)"; a name without
// a counter is not renamed.
func sdBootNext(file string) string {
	m := regexp.MustCompile(`^(.*)\+(\d+)(?:-(\d+))?(\.conf)$`).FindStringSubmatch(file)
	if m == nil {
		return file
	}
	left, _ := strconv.Atoi(m[2])
	done := 0
	if m[3] != "" {
		done, _ = strconv.Atoi(m[3])
	}
	return fmt.Sprintf("%s+%d-%d%s", m[1], max(left-1, 0), done+1, m[4])
}

// TestJumpCountsTriesAsSystemdBoot arms slot b and jumps into it, over
// and over, on every backend: the jump is planned only into a freshly
// armed slot, and each CountTry renames the entry exactly as systemd-boot
// would before booting it, so that a slot whose jumps fail ends where
// systemd-boot's own tries end: the old slot boots.
func TestJumpCountsTriesAsSystemdBoot(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			fsys := b.new(t)
			read := func() State {
				t.Helper()
				st, err := Read(fsys)
				require.NoError(t, err)
				return st
			}
			kernel, initrd := blob(30, 50_000), blob(31, 120_000)

			_, why := PlanJump(read(), "a")
			assert.Equal(t, "the next boot is the running slot a", why, "nothing staged")
			_, err := Stage(fsys, "b", held(kernel, initrd))
			require.NoError(t, err)
			_, why = PlanJump(read(), "a")
			assert.Equal(t, "the next boot is the running slot a", why, "a held slot is not jumped into")
			_, err = Arm(fsys, "b")
			require.NoError(t, err)

			st := read()
			j, why := PlanJump(st, "a")
			require.Empty(t, why)
			assert.Equal(t, "b", j.Slot)
			assert.Equal(t, "etcdbox-b+3.conf", j.Entry.File)
			assert.Equal(t, "console=ttyS0,115200 panic=10 etcdbox.slot=b etcdbox.debug=1", j.Cmdline, "the entry's options, as systemd-boot passes them")
			got, err := fsys.ReadFile(j.Kernel)
			require.NoError(t, err)
			assert.Equal(t, kernel, got, "the jump loads the slot's kernel")
			got, err = fsys.ReadFile(j.Initrd)
			require.NoError(t, err)
			assert.Equal(t, initrd, got, "and its initrd")
			_, why = PlanJump(st, "b")
			assert.Equal(t, "the next boot is the running slot b", why)
			_, why = PlanJump(st, "")
			assert.Equal(t, "booted from no slot", why)

			// Each boot of b, by jump or by the firmware, counts one try
			// the same way, until none is left and a boots again.
			file := j.Entry.File
			for _, want := range []string{"etcdbox-b+2-1.conf", "etcdbox-b+1-2.conf", "etcdbox-b+0-3.conf"} {
				require.Equal(t, want, sdBootNext(file), "the test's model of systemd-boot")
				file, err = CountTry(fsys, "b")
				require.NoError(t, err)
				assert.Equal(t, want, file)
				assert.ElementsMatch(t, []string{"etcdbox-a.conf", want}, entryFiles(t, fsys))
				st = read()
				booted, trying := Booted(map[string]string{"etcdbox.slot": "b"}, st)
				assert.True(t, booted == "b" && trying, "the jumped-into slot is on probation")
				_, why = PlanJump(st, "a")
				assert.NotEmpty(t, why, "a slot tried once is never jumped into again: %s", file)
			}
			assert.Equal(t, "a", read().Next(), "no try left: systemd-boot boots the old slot")
			_, why = PlanJump(read(), "a")
			assert.Equal(t, "the next boot is the running slot a", why)

			// Booted when every entry is bad, systemd-boot still counts.
			file, err = CountTry(fsys, "b")
			require.NoError(t, err)
			assert.Equal(t, sdBootNext("etcdbox-b+0-3.conf"), file)
			// An entry without a counter is left alone.
			noOps(t, fsys, "CountTry of a blessed slot", func(fsys FS) error { _, err := CountTry(fsys, "a"); return err })
			if fat, ok := fsys.(*fatFS); ok {
				fsck(t, fat.image)
				out, err := exec.Command("fsck.vfat", "-n", "-l", fat.image).CombinedOutput()
				require.NoError(t, err, "%s", out)
				assert.Contains(t, string(out), "Checking file /loader/entries/etcdbox-b+0-4.conf", "the counted name as another FAT reader sees it")
			}
		})
	}
}

// TestJumpAfterPowerCut cuts the power at every write of an arm followed
// by a counted try: whatever is on the disk, the next boot is either the
// old slot or a try of the new one with its count, never a boot that
// escapes the counting.
func TestJumpAfterPowerCut(t *testing.T) {
	for budget := 0; ; budget++ {
		fsys := newFATESP(t)
		_, err := Stage(fsys, "b", held(blob(40, 9000), blob(41, 9000)))
		require.NoError(t, err)
		c := &crashFS{FS: fsys, budget: budget}
		_, err = Arm(c, "b")
		if err == nil {
			_, err = CountTry(c, "b")
		}
		st, rerr := Read(fsys)
		require.NoError(t, rerr)
		b := st.Slots["b"]
		switch {
		case st.Next() == "a":
		case b.Entry != nil && b.Entry.Name.Counted && b.Entry.Name.Left > 0:
		default:
			t.Fatalf("budget %d: next %q with %s", budget, st.Next(), describe(st))
		}
		if err == nil {
			assert.Equal(t, "etcdbox-b+2-1.conf", b.Entry.File)
			return
		}
	}
}
