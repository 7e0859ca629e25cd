package qemu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArgs(t *testing.T) {
	c, err := Config{
		Name: "n1", Dir: "/run/n1", Image: "/img,1.raw",
		OVMFCode: "/fw/code.fd", OVMFVars: "/fw/vars.fd",
		Forwards: []Forward{{HostPort: 4001, GuestPort: 2379}, {HostAddr: "127.0.0.2", HostPort: 4002, GuestPort: 9379}},
	}.withDefaults()
	require.NoError(t, err)
	for _, tt := range []struct {
		name  string
		accel string
		d     disk
		want  []string
	}{
		{"tcg raw", "tcg", disk{"disk.raw", "raw"}, []string{
			"-machine q35", "-m 1024", "-smp 1", "-accel tcg,thread=multi,tb-size=64 -cpu max",
			"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/code.fd",
			"-drive if=pflash,format=raw,unit=1,file=OVMF_VARS.fd",
			"-drive if=none,id=disk0,file=disk.raw,format=raw,cache=writeback,discard=unmap",
			"-device virtio-blk-pci,drive=disk0,id=vdisk0,bootindex=0",
			"-netdev user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:4001-:2379,hostfwd=tcp:127.0.0.2:4002-:9379",
			"-device virtio-net-pci,netdev=net0,mac=" + MAC("n1", 0).String() + ",romfile=",
			"-action watchdog=reset -device i6300esb",
			"-qmp unix:qmp.sock,server=on,wait=off",
			"-chardev file,id=console0,path=console.log -serial chardev:console0",
			"-pidfile qemu.pid",
		}},
		{"kvm qcow2", "kvm", disk{"disk.qcow2", "qcow2"}, []string{
			"-accel kvm -cpu host",
			"file=disk.qcow2,format=qcow2,",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			line := strings.Join(c.args(tt.accel, tt.d), " ")
			for _, w := range tt.want {
				assert.Contains(t, line, w)
			}
		})
	}
}

// TestArgsNoWatchdog leaves the i6300esb out, keeps what an expired
// watchdog does, and lets the chipset's TCO watchdog reset the machine.
func TestArgsNoWatchdog(t *testing.T) {
	c, err := Config{Name: "n1", Dir: "/run/n1", Image: "/img.raw", OVMFCode: "/fw/code.fd", OVMFVars: "/fw/vars.fd", NoWatchdog: true}.withDefaults()
	require.NoError(t, err)
	line := strings.Join(c.args("tcg", disk{"disk.raw", "raw"}), " ")
	assert.NotContains(t, line, "i6300esb")
	assert.Contains(t, line, "-action watchdog=reset")
	assert.Contains(t, line, "-global ICH9-LPC.noreboot=false", "the chipset's TCO watchdog may reset the machine")
}

func TestWithDefaults(t *testing.T) {
	_, err := Config{Name: "N_1", Network: "tap", Accel: "hvf", MemoryMiB: -1,
		Forwards: []Forward{{HostAddr: "localhost", GuestPort: 0}}}.withDefaults()
	require.Error(t, err)
	for _, want := range []string{`name "N_1"`, "dir: missing", "image: missing", "OVMF code: missing",
		`network "tap"`, `accel "hvf"`, "memory -1 MiB", `forwards[0]: host address "localhost"`, "forwards[0]: guest port 0"} {
		assert.ErrorContains(t, err, want)
	}
}

func TestMAC(t *testing.T) {
	a, b := MAC("n1", 0), MAC("n2", 0)
	assert.Equal(t, a, MAC("n1", 0), "deterministic")
	assert.NotEqual(t, a, b)
	assert.NotEqual(t, a, MAC("n1", 1))
	assert.Equal(t, "52:54:00", a.String()[:8])
}

func TestFreePort(t *testing.T) {
	p, err := FreePort("127.0.0.1")
	require.NoError(t, err)
	assert.Positive(t, p)
}
