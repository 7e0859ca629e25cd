package image

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
)

// Mode bits of the newc format (the octal S_IF* values of stat(2)).
const (
	cpioDir     = 0o040000
	cpioRegular = 0o100000
	cpioSymlink = 0o120000
	cpioCharDev = 0o020000
)

const cpioTrailer = "TRAILER!!!"

// cpioMode converts a Go file mode to the st_mode a newc header carries.
func cpioMode(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	switch {
	case m.IsDir():
		mode |= cpioDir
	case m.Type() == fs.ModeSymlink:
		mode |= cpioSymlink
	case m&fs.ModeCharDevice != 0:
		mode |= cpioCharDev
	default:
		mode |= cpioRegular
	}
	return mode
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeCPIO writes nodes, in their order, as a "newc" (SVR4, no checksum)
// archive, the format the kernel unpacks into its rootfs. The bytes
// depend only on the nodes and mtime: owner root, inodes numbered in
// order, every entry its own inode (no hard links). A directory must come
// before what it holds. It returns the archive size.
func writeCPIO(ctx context.Context, w io.Writer, nodes []*node, mtime int64) (int64, error) {
	return writeCPIOFrom(ctx, w, nodes, 1, mtime)
}

// writeCPIOFrom is writeCPIO with the inodes numbered from first, so that
// the archives of one initrd (cpioParts) do not share numbers.
func writeCPIOFrom(ctx context.Context, w io.Writer, nodes []*node, first uint32, mtime int64) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	ino := first - 1
	for _, n := range nodes {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ino++
		if err := writeCPIOEntry(bw, n, ino, mtime); err != nil {
			return 0, fmt.Errorf("write /%s: %w", n.path, err)
		}
	}
	if err := writeCPIOHeader(bw, cpioTrailer, 0, 0, 1, 0, 0, 0, 0); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

func writeCPIOEntry(w io.Writer, n *node, ino uint32, mtime int64) error {
	nlink := uint32(1)
	if n.mode.IsDir() {
		nlink = 2
	}
	size := n.contentSize()
	if err := writeCPIOHeader(w, n.path, ino, cpioMode(n.mode), nlink, mtime, size, n.major, n.minor); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	r, err := n.open()
	if err != nil {
		return err
	}
	defer r.Close()
	copied, err := io.Copy(w, io.LimitReader(r, size))
	if err != nil {
		return err
	}
	if copied != size {
		return fmt.Errorf("%s shrank from %d to %d bytes while being archived", n.src, size, copied)
	}
	return pad4(w, size)
}

// writeCPIOHeader writes one newc header and the NUL-terminated name,
// padded to a multiple of four bytes.
func writeCPIOHeader(w io.Writer, name string, ino, mode, nlink uint32, mtime, size int64, rmajor, rminor uint32) error {
	if size > 0xffffffff {
		return fmt.Errorf("%s is %d bytes, more than newc can hold", name, size)
	}
	const magic = "070701"
	// Fields: ino mode uid gid nlink mtime filesize devmajor devminor
	// rdevmajor rdevminor namesize check.
	hdr := fmt.Sprintf("%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		magic, ino, mode, 0, 0, nlink, uint32(mtime), uint32(size), 0, 0, rmajor, rminor, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr); err != nil {
		return err
	}
	if _, err := io.WriteString(w, name+"\x00"); err != nil {
		return err
	}
	return pad4(w, int64(len(hdr)+len(name)+1))
}

var zeros [4]byte

// pad4 writes the NULs that align an item of length n to four bytes.
func pad4(w io.Writer, n int64) error {
	_, err := w.Write(zeros[:(4-n%4)%4])
	return err
}
