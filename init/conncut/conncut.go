// Package conncut finds the TCP connections a process holds on some of
// its local ports, and ends them from outside the process.
//
// The init uses it to end etcd's graceful stop on time. On SIGTERM etcd
// (embed.Etcd.Close) first stops its client servers, and waits for every
// client connection to go idle, up to its request timeout (5 s plus two
// election timeouts: 7 s with etcd's defaults). A connection that carries
// a watch, as every kube-apiserver's does, never goes idle, so every stop
// of a member with a watcher waited the whole timeout before raft even
// began to stop, and only then did etcd close those connections itself.
// The init gives in-flight requests a moment (init/etcdstop.go) and then
// ends the connections that are left, as etcd would at its timeout.
//
//	conns, err := conncut.List("/proc", pid, []uint16{2379})
//	n, err := conncut.Cut(pid, conns) // shutdown(2) on each, via pidfd_getfd(2)
//
// A connection is matched by the socket's inode, read from the process's
// open files (/proc/PID/fd) and its network namespace's TCP tables
// (/proc/PID/net/tcp, tcp6), so listeners and other processes' sockets
// are never touched.
package conncut

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Conn is one TCP connection of a process.
type Conn struct {
	Local, Remote netip.AddrPort
	// State is the kernel's TCP state number (1 established, 8 close
	// wait; see include/net/tcp_states.h).
	State int
	Inode uint64
	// FD is the process's file descriptor of the socket.
	FD int
}

func (c Conn) String() string {
	return fmt.Sprintf("%s-%s (fd %d)", c.Local, c.Remote, c.FD)
}

// tcpListen is the TCP state of a listening socket.
const tcpListen = 0x0a

// List returns the TCP connections (not listeners) that process pid holds
// open with a local port among ports, reading procDir (/proc).
func List(procDir string, pid int, ports []uint16) ([]Conn, error) {
	fds, err := socketFDs(filepath.Join(procDir, strconv.Itoa(pid), "fd"))
	if err != nil {
		return nil, err
	}
	var out []Conn
	for _, table := range []string{"tcp", "tcp6"} {
		file := filepath.Join(procDir, strconv.Itoa(pid), "net", table)
		conns, err := readTable(file)
		if errors.Is(err, fs.ErrNotExist) && table == "tcp6" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			fd, ok := fds[c.Inode]
			if !ok || c.State == tcpListen || !slices.Contains(ports, c.Local.Port()) {
				continue
			}
			c.FD = fd
			out = append(out, c)
		}
	}
	return out, nil
}

// socketFDs maps the socket inodes among the open files in dir
// (/proc/PID/fd) to their descriptors.
func socketFDs(dir string) (map[uint64]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open files: %w", err)
	}
	out := map[uint64]int{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		ino, ok := strings.CutPrefix(target, "socket:[")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64); err == nil {
			out[n] = fd
		}
	}
	return out, nil
}

// readTable parses a /proc/net/tcp or tcp6 table.
func readTable(file string) ([]Conn, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("tcp table: %w", err)
	}
	defer f.Close()
	var out []Conn
	sc := bufio.NewScanner(f)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		c, err := parseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("tcp table %s: %w", file, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tcp table %s: %w", file, err)
	}
	return out, nil
}

// parseLine parses one entry of a TCP table:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	0: 0100007F:094B 0100007F:B2D4 01 00000000:00000000 00:00000000 00000000     0        0 31337 ...
func parseLine(line string) (Conn, error) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return Conn{}, fmt.Errorf("entry %q: %d fields, want at least 10", line, len(f))
	}
	local, err := parseAddr(f[1])
	if err != nil {
		return Conn{}, fmt.Errorf("entry %q: local address: %w", line, err)
	}
	remote, err := parseAddr(f[2])
	if err != nil {
		return Conn{}, fmt.Errorf("entry %q: remote address: %w", line, err)
	}
	st, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return Conn{}, fmt.Errorf("entry %q: state %q: %w", line, f[3], err)
	}
	ino, err := strconv.ParseUint(f[9], 10, 64)
	if err != nil {
		return Conn{}, fmt.Errorf("entry %q: inode %q: %w", line, f[9], err)
	}
	return Conn{Local: local, Remote: remote, State: int(st), Inode: ino}, nil
}

// parseAddr parses "0100007F:094B": the address as the kernel prints it
// (each 32-bit word of the network-order bytes printed as a host-order
// number), a colon, the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%q: no port", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: port: %w", s, err)
	}
	if len(a) != 8 && len(a) != 32 {
		return netip.AddrPort{}, fmt.Errorf("%q: address of %d hex digits, want 8 or 32", s, len(a))
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: address: %w", s, err)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
