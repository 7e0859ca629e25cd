package upgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSlotOptions(t *testing.T) {
	base := "console=ttyS0,115200 panic=10 etcdbox.slot=a"
	tests := []struct {
		name, booted, prev, extras, want string
	}{
		{"no extras anywhere", base, "", "", base},
		{"new extras appended", base, "", "rdinit=/x  quiet", base + " rdinit=/x quiet"},
		{"booted image's extras replaced", base + " etcdbox.debug=1 quiet", "quiet\n", "loglevel=7", base + " etcdbox.debug=1 loglevel=7"},
		{"same extras again stay once", base + " quiet", "quiet", "quiet", base + " quiet"},
		{"operator's copy of an extra kept", "quiet " + base + " quiet", "quiet", "", "quiet " + base},
		{"record of an argument that is gone", base, "quiet", "", base},
		{"a command-line seed is never copied", base + " etcdbox.seed=Y2x1c3RlcjogeA== quiet", "", "", base + " quiet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, slotOptions(tt.booted, tt.prev, tt.extras))
		})
	}
}
