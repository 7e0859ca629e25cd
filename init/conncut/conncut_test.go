package conncut

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       Conn
	}{
		{"ipv4 established", "   3: 0100007F:094B 0100007F:B2D4 01 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 20 4 30 10 -1",
			Conn{Local: netip.MustParseAddrPort("127.0.0.1:2379"), Remote: netip.MustParseAddrPort("127.0.0.1:45780"), State: 1, Inode: 31337}},
		{"ipv4 listener", "   0: 0F02000A:094B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12 1 0000000000000000 100 0 0 10 0",
			Conn{Local: netip.MustParseAddrPort("10.0.2.15:2379"), Remote: netip.MustParseAddrPort("0.0.0.0:0"), State: 10, Inode: 12}},
		{"ipv6 loopback", "   1: 00000000000000000000000001000000:094B 00000000000000000000000001000000:C350 08 00000000:00000000 00:00000000 00000000     0        0 99 1",
			Conn{Local: netip.MustParseAddrPort("[::1]:2379"), Remote: netip.MustParseAddrPort("[::1]:50000"), State: 8, Inode: 99}},
		{"ipv4 in ipv6", "   2: 0000000000000000FFFF00000100007F:094B 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 7 1",
			Conn{Local: netip.MustParseAddrPort("127.0.0.1:2379"), Remote: netip.MustParseAddrPort("127.0.0.1:50000"), State: 1, Inode: 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseLine(c.line)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, c := range []struct{ name, line, want string }{
		{"short", "0: 0100007F:094B 0100007F:B2D4 01", "4 fields"},
		{"no port", "0: 0100007F 0100007F:B2D4 01 0:0 00:0 0 0 0 5", "local address"},
		{"odd address", "0: 0100007:094B 0100007F:B2D4 01 0:0 00:0 0 0 0 5", "7 hex digits"},
		{"not hex", "0: 0100007F:094B 0100007X:B2D4 01 0:0 00:0 0 0 0 5", "remote address"},
		{"state", "0: 0100007F:094B 0100007F:B2D4 zz 0:0 00:0 0 0 0 5", `state "zz"`},
		{"inode", "0: 0100007F:094B 0100007F:B2D4 01 0:0 00:0 0 0 0 -5", `inode "-5"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseLine(c.line)
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
		})
	}
}

// TestList reads a fake /proc: only connections on the given ports whose
// sockets the process holds, never listeners.
func TestList(t *testing.T) {
	proc := t.TempDir()
	dir := filepath.Join(proc, "42")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "net"), 0o755))
	for fd, target := range map[int]string{3: "socket:[100]", 4: "socket:[101]", 5: "socket:[102]", 6: "/dev/null", 7: "socket:[104]", 8: "pipe:[105]"} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(fd))))
	}
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp := header +
		"   0: 0100007F:094B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1\n" + // the listener
		"   1: 0100007F:094B 0100007F:B2D4 01 00000000:00000000 00:00000000 00000000     0        0 101 1\n" + // a client
		"   2: 0100007F:094C 0100007F:B2D5 01 00000000:00000000 00:00000000 00000000     0        0 102 1\n" + // the peer port
		"   3: 0100007F:094B 0100007F:B2D6 01 00000000:00000000 00:00000000 00000000     0        0 103 1\n" + // another process's
		"   4: 0100007F:094B 0100007F:B2D7 06 00000000:00000000 00:00000000 00000000     0        0 0 1\n" // time wait
	tcp6 := header +
		"   0: 00000000000000000000000001000000:094B 00000000000000000000000001000000:C350 08 00000000:00000000 00:00000000 00000000     0        0 104 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "net", "tcp"), []byte(tcp), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "net", "tcp6"), []byte(tcp6), 0o644))

	got, err := List(proc, 42, []uint16{2379})
	require.NoError(t, err)
	assert.Equal(t, []Conn{
		{Local: netip.MustParseAddrPort("127.0.0.1:2379"), Remote: netip.MustParseAddrPort("127.0.0.1:45780"), State: 1, Inode: 101, FD: 4},
		{Local: netip.MustParseAddrPort("[::1]:2379"), Remote: netip.MustParseAddrPort("[::1]:50000"), State: 8, Inode: 104, FD: 7},
	}, got)

	got, err = List(proc, 42, []uint16{2379, 2380})
	require.NoError(t, err)
	assert.Len(t, got, 3, "the peer port's connection too")

	require.NoError(t, os.Remove(filepath.Join(dir, "net", "tcp6")))
	got, err = List(proc, 42, []uint16{2379})
	require.NoError(t, err)
	assert.Len(t, got, 1, "a kernel without IPv6")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "net", "tcp"), []byte(header+"   0: garbage\n"), 0o644))
	_, err = List(proc, 42, []uint16{2379})
	assert.ErrorContains(t, err, `"   0: garbage"`, "a table it cannot read is an error that quotes the entry")

	_, err = List(proc, 43, []uint16{2379})
	assert.ErrorContains(t, err, "open files", "a process that is gone")
}
