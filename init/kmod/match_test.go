package kmod

import "testing"

func TestFnmatch(t *testing.T) {
	for _, tt := range []struct {
		name, pattern, s string
		want             bool
	}{
		{"literal", "virtio_blk", "virtio_blk", true},
		{"literal mismatch", "virtio_blk", "virtio_net", false},
		{"star tail", "virtio:d00000002v*", "virtio:d00000002v00001AF4", true},
		{"star empty", "virtio:d00000002v*", "virtio:d00000002v", true},
		{"star wrong device", "virtio:d00000002v*", "virtio:d00000001v00001AF4", false},
		{"pci class", "pci:v*d*sv*sd*bc01sc08i02*", "pci:v00008086d00005845sv00001AF4sd00001100bc01sc08i02", true},
		{"pci vendor", "pci:v00001AF4d*sv*sd*bc*sc*i*", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00", true},
		{"pci other vendor", "pci:v00001AF4d*sv*sd*bc*sc*i*", "pci:v00008086d00001001sv00001AF4sd00000002bc01sc00i00", false},
		{"star crosses slash", "of:N*T*Cfoo*", "of:Nbus/devTCfoo,bar", true},
		{"question", "acpi:PNP0C0?:", "acpi:PNP0C0C:", true},
		{"question needs a byte", "ab?", "ab", false},
		{"range", "usb:v13FDp3940d0[0-2]*dc*", "usb:v13FDp3940d0150dc00", true},
		{"range miss", "usb:v13FDp3940d0[0-2]*dc*", "usb:v13FDp3940d0350dc00", false},
		{"negated bang", "a[!0-9]c", "abc", true},
		{"negated caret", "a[^0-9]c", "a1c", false},
		{"bracket first is literal ]", "a[]]c", "a]c", true},
		{"unterminated bracket is literal", "a[bc", "a[bc", true},
		{"escape", `a\*c`, "a*c", true},
		{"escape no glob", `a\*c`, "abc", false},
		{"backtrack", "*bc*bc", "abcxbcbc", true},
		{"many stars", "*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac", false},
		{"trailing stars", "abc***", "abc", true},
		{"empty pattern", "", "", true},
		{"empty pattern nonempty s", "", "a", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := fnmatch(tt.pattern, tt.s); got != tt.want {
				t.Errorf("fnmatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
			}
		})
	}
}

func TestNormalizeAlias(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"dashes", "crypto-crc32c", "crypto_crc32c"},
		{"range kept", "usb:v13FDp3940d0[0-2]*dc*", "usb:v13FDp3940d0[0-2]*dc*"},
		{"outside and inside", "scsi:t-0x0[0-9]-x", "scsi:t_0x0[0-9]_x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeAlias(tt.in); got != tt.want {
				t.Errorf("normalizeAlias(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNameOf(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "kernel/fs/ext4/ext4.ko", "ext4"},
		{"dash", "kernel/arch/x86/crypto/crc32c-intel.ko", "crc32c_intel"},
		{"xz", "kernel/drivers/block/virtio_blk.ko.xz", "virtio_blk"},
		{"zst", "/lib/modules/6.1/kernel/lib/crc16.ko.zst", "crc16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NameOf(tt.in); got != tt.want {
				t.Errorf("NameOf(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
