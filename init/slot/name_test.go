package slot

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		want   Name
		status Status
		reason string // part of the error; "" when the name parses
	}{
		{name: "fresh", file: "etcdbox-b+3.conf", want: Name{Slot: "b", Counted: true, Left: 3}, status: Trying},
		{name: "tried once", file: "etcdbox-b+2-1.conf", want: Name{Slot: "b", Counted: true, Left: 2, Done: 1}, status: Trying},
		{name: "bad", file: "etcdbox-b+0-3.conf", want: Name{Slot: "b", Counted: true, Left: 0, Done: 3}, status: Bad},
		{name: "bad never tried", file: "etcdbox-a+0-0.conf", want: Name{Slot: "a", Counted: true}, status: Bad},
		{name: "blessed", file: "etcdbox-a.conf", want: Name{Slot: "a"}, status: Blessed},
		{name: "FAT case", file: "ETCDBOX-A+1-2.CONF", want: Name{Slot: "a", Counted: true, Left: 1, Done: 2}, status: Trying},
		{name: "zero done", file: "etcdbox-a+3-0.conf", want: Name{Slot: "a", Counted: true, Left: 3}, status: Trying},
		{name: "unknown slot", file: "etcdbox-c.conf", reason: `unknown slot "c"`},
		{name: "no slot", file: "etcdbox-.conf", reason: `unknown slot ""`},
		{name: "minus instead of plus", file: "etcdbox-b-1.conf", reason: `unknown slot "b-1"`},
		{name: "empty counter", file: "etcdbox-b+.conf", reason: "malformed boot counter"},
		{name: "letters", file: "etcdbox-b+x-1.conf", reason: "malformed boot counter"},
		{name: "empty done", file: "etcdbox-b+1-.conf", reason: "malformed boot counter"},
		{name: "sign", file: "etcdbox-b+-1.conf", reason: "malformed boot counter"},
		{name: "two counters", file: "etcdbox-b+1+2.conf", reason: "malformed boot counter"},
		{name: "huge", file: "etcdbox-b+99999999999999999999.conf", reason: "out of range"},
		{name: "temporary", file: "etcdbox-b+3.conf.tmp", reason: "temporary file"},
		{name: "not conf", file: "etcdbox-a", reason: "not a .conf file"},
		{name: "foreign", file: "debian.conf", reason: "not an etcdbox entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseName(tt.file)
			if tt.reason != "" {
				if assert.Error(t, err, "ParseName(%q)", tt.file) {
					assert.Contains(t, err.Error(), tt.reason)
					assert.Contains(t, err.Error(), tt.file, "the error names the file")
				}
				return
			}
			if assert.NoError(t, err) {
				assert.Equal(t, tt.want, got, "ParseName(%q)", tt.file)
				assert.Equal(t, tt.status, got.Status(), "ParseName(%q).Status()", tt.file)
			}
		})
	}
}

func TestNameString(t *testing.T) {
	tests := []struct {
		name string
		n    Name
		want string
	}{
		{"blessed", Name{Slot: "a"}, "etcdbox-a.conf"},
		{"fresh", Name{Slot: "b", Counted: true, Left: 3}, "etcdbox-b+3.conf"},
		{"tried", Name{Slot: "b", Counted: true, Left: 2, Done: 1}, "etcdbox-b+2-1.conf"},
		{"bad", Name{Slot: "b", Counted: true, Left: 0, Done: 3}, "etcdbox-b+0-3.conf"},
		{"bad never tried", Name{Slot: "b", Counted: true}, "etcdbox-b+0-0.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.n.String())
			back, err := ParseName(tt.want)
			assert.NoError(t, err)
			assert.Equal(t, tt.n, back, "ParseName(%q)", tt.want)
		})
	}
}

func TestInSlot(t *testing.T) {
	tests := []struct {
		file string
		slot string
		want bool
	}{
		{"etcdbox-b.conf", "b", true},
		{"etcdbox-b+3.conf", "b", true},
		{"ETCDBOX-B+2-1.CONF", "b", true},
		{"etcdbox-b+3.conf.tmp", "b", true},
		{"etcdbox-b+x.conf", "b", true},
		{"etcdbox-a.conf", "b", false},
		{"etcdbox-bb.conf", "b", false},
		{"etcdbox-c.conf", "b", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, inSlot(tt.file, tt.slot), "inSlot(%q, %q)", tt.file, tt.slot)
	}
}

func TestOther(t *testing.T) {
	for in, want := range map[string]string{"a": "b", "b": "a", "": "", "c": "", "A": ""} {
		assert.Equal(t, want, Other(in), "Other(%q)", in)
	}
}
