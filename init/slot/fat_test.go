package slot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// espSize is the size of the builder's ESP (CONTRACTS "Disk").
const espSize = 512 << 20

// fatFS is an FS over a FAT32 filesystem image through go-diskfs, the
// library the builder writes the ESP with. Every call opens the
// filesystem afresh, as a mount would. go-diskfs v1.9.4 does not free the
// clusters of a removed or replaced file and leaves the FSInfo free count
// stale, both of which fsck.vfat reports; every mutating call therefore
// ends with reclaim, which frees unreachable clusters and fails on
// cross-linked or broken chains.
type fatFS struct {
	image string
	size  int64
}

var _ FS = (*fatFS)(nil)

// newFAT creates an empty FAT32 image of espSize bytes (sparse).
func newFAT(t testing.TB) *fatFS {
	t.Helper()
	img := filepath.Join(t.TempDir(), "esp.img")
	f, err := os.Create(img)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(espSize))
	_, err = fat32.Create(file.New(f, false), espSize, 0, 512, "ETCDBOX-ESP", true)
	require.NoError(t, err, "create FAT32")
	require.NoError(t, reclaim(f))
	return &fatFS{image: img, size: espSize}
}

// newFATESP returns a FAT32 image holding the builder's ESP layout.
func newFATESP(t testing.TB) FS {
	t.Helper()
	fsys := newFAT(t)
	populate(t, fsys, builderESP())
	return fsys
}

// with runs fn on the filesystem, and reclaim after a mutating fn.
func (f *fatFS) with(mutating bool, fn func(*fat32.FileSystem) error) error {
	fh, err := os.OpenFile(f.image, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	fsys, err := fat32.Read(file.New(fh, false), f.size, 0, 512)
	if err != nil {
		return fmt.Errorf("open FAT32 %s: %w", f.image, err)
	}
	if err := fn(fsys); err != nil {
		return err
	}
	if mutating {
		if err := reclaim(fh); err != nil {
			return fmt.Errorf("reclaim %s: %w", f.image, err)
		}
	}
	return nil
}

// lookup finds name in its parent directory, case-insensitively as FAT
// does; go-diskfs reports a missing file with an error of its own.
func lookup(fsys *fat32.FileSystem, op, name string) (fs.DirEntry, error) {
	des, err := fsys.ReadDir(path.Dir(name))
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	for _, de := range des {
		if strings.EqualFold(de.Name(), path.Base(name)) {
			return de, nil
		}
	}
	return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (f *fatFS) ReadDir(name string) (des []fs.DirEntry, err error) {
	err = f.with(false, func(fsys *fat32.FileSystem) error {
		if name != "." {
			de, err := lookup(fsys, "readdir", name)
			if err != nil {
				return err
			}
			if !de.IsDir() {
				return &fs.PathError{Op: "readdir", Path: name, Err: fmt.Errorf("not a directory")}
			}
		}
		des, err = fsys.ReadDir(name)
		return err
	})
	return des, err
}

func (f *fatFS) ReadFile(name string) (data []byte, err error) {
	err = f.with(false, func(fsys *fat32.FileSystem) error {
		if _, err := lookup(fsys, "read", name); err != nil {
			return err
		}
		data, err = fsys.ReadFile("/" + name)
		return err
	})
	return data, err
}

// WriteFile writes with a single Write: go-diskfs rewrites both FATs on
// every Write.
func (f *fatFS) WriteFile(name string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return f.with(true, func(fsys *fat32.FileSystem) error {
		if d := path.Dir(name); d != "." {
			if _, err := lookup(fsys, "write", d); err != nil {
				return err
			}
		}
		fh, err := fsys.OpenFile("/"+name, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		n, err := fh.Write(data)
		if err == nil && n != len(data) {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(data))
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	})
}

func (f *fatFS) Rename(oldname, newname string) error {
	return f.with(true, func(fsys *fat32.FileSystem) error {
		if _, err := lookup(fsys, "rename", oldname); err != nil {
			return err
		}
		if err := fsys.Rename("/"+oldname, "/"+newname); err != nil {
			return fmt.Errorf("rename %s to %s: %w", oldname, newname, err)
		}
		return nil
	})
}

func (f *fatFS) Remove(name string) error {
	return f.with(true, func(fsys *fat32.FileSystem) error {
		if _, err := lookup(fsys, "remove", name); err != nil {
			return err
		}
		if err := fsys.Remove("/" + name); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		return nil
	})
}

func (f *fatFS) Mkdir(name string) error {
	return f.with(true, func(fsys *fat32.FileSystem) error {
		if de, err := lookup(fsys, "mkdir", name); err == nil {
			if !de.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
			}
			return nil
		}
		if err := fsys.Mkdir("/" + name); err != nil {
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
		return nil
	})
}

// fatImage is the file a FAT32 filesystem lives in, at offset 0.
type fatImage interface {
	io.ReaderAt
	io.WriterAt
}

// reclaim walks the FAT32 in d from its root directory and frees every
// allocated cluster that no file or directory reaches, then rewrites the
// FSInfo free count. It fails on a chain that leaves the volume or meets
// another (cross-linked files). It also points the ".." entry of the root's
// subdirectories at cluster 0, as the FAT specification wants and
// go-diskfs does not (image/fatfix.go does the same for the builder).
func reclaim(d fatImage) error {
	bs := make([]byte, 512)
	if _, err := d.ReadAt(bs, 0); err != nil {
		return err
	}
	le16 := func(b []byte) int64 { return int64(binary.LittleEndian.Uint16(b)) }
	le32 := func(b []byte) int64 { return int64(binary.LittleEndian.Uint32(b)) }
	var (
		bps         = le16(bs[0x0b:])
		clusterSize = int64(bs[0x0d]) * bps
		fatStart    = le16(bs[0x0e:]) * bps
		fats        = int64(bs[0x10])
		fatBytes    = le32(bs[0x24:]) * bps
		rootCluster = uint32(le32(bs[0x2c:]))
		fsInfo      = le16(bs[0x30:]) * bps
		dataStart   = fatStart + fats*fatBytes
		clusters    = uint32((le32(bs[0x20:])*bps - dataStart) / clusterSize)
	)
	if bps == 0 || clusterSize == 0 || binary.LittleEndian.Uint16(bs[0x1fe:]) != 0xaa55 {
		return fmt.Errorf("no FAT32 boot sector")
	}
	if max := uint32(fatBytes/4) - 2; clusters > max {
		clusters = max
	}
	fat := make([]byte, fatBytes)
	if _, err := d.ReadAt(fat, fatStart); err != nil {
		return err
	}
	next := func(c uint32) uint32 { return binary.LittleEndian.Uint32(fat[4*c:]) & 0x0fffffff }
	used := make([]bool, clusters+2)
	chain := func(first uint32) ([]uint32, error) {
		var cs []uint32
		for c := first; ; c = next(c) {
			if c < 2 || c >= clusters+2 {
				return nil, fmt.Errorf("cluster chain from %d leaves the volume at %#x", first, c)
			}
			if used[c] {
				return nil, fmt.Errorf("cluster %d is cross-linked (chain from %d)", c, first)
			}
			used[c] = true
			cs = append(cs, c)
			if next(c) >= 0x0ffffff8 {
				return cs, nil
			}
		}
	}
	var walk func(first uint32, isRoot, parentIsRoot bool) error
	walk = func(first uint32, isRoot, parentIsRoot bool) error {
		cs, err := chain(first)
		if err != nil {
			return err
		}
		for _, c := range cs {
			off := dataStart + int64(c-2)*clusterSize
			buf := make([]byte, clusterSize)
			if _, err := d.ReadAt(buf, off); err != nil {
				return err
			}
			dirty := false
			for i := 0; i+32 <= len(buf); i += 32 {
				e := buf[i : i+32]
				if e[0] == 0 {
					break
				}
				const attrDir, attrLabel, attrLFN = 0x10, 0x08, 0x0f
				if e[0] == 0xe5 || e[11] == attrLFN || e[11]&attrLabel != 0 {
					continue
				}
				cl := uint32(le16(e[20:]))<<16 | uint32(le16(e[26:]))
				if e[0] == '.' {
					if string(e[:11]) == "..         " && parentIsRoot && cl != 0 {
						copy(e[20:22], []byte{0, 0})
						copy(e[26:28], []byte{0, 0})
						dirty = true
					}
					continue
				}
				switch {
				case e[11]&attrDir != 0:
					if err := walk(cl, false, isRoot); err != nil {
						return err
					}
				case cl != 0:
					if _, err := chain(cl); err != nil {
						return err
					}
				}
			}
			if dirty {
				if _, err := d.WriteAt(buf, off); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rootCluster, true, false); err != nil {
		return err
	}
	free, nextFree := uint32(0), uint32(0xffffffff)
	for c := uint32(2); c < clusters+2; c++ {
		if !used[c] && next(c) != 0 {
			v := binary.LittleEndian.Uint32(fat[4*c:]) & 0xf0000000
			binary.LittleEndian.PutUint32(fat[4*c:], v)
		}
		if next(c) == 0 {
			free++
			if nextFree == 0xffffffff {
				nextFree = c
			}
		}
	}
	for i := int64(0); i < fats; i++ {
		if _, err := d.WriteAt(fat, fatStart+i*fatBytes); err != nil {
			return err
		}
	}
	info := binary.LittleEndian.AppendUint32(nil, free)
	info = binary.LittleEndian.AppendUint32(info, nextFree)
	_, err := d.WriteAt(info, fsInfo+488)
	return err
}

// fsck runs `fsck.vfat -n` on a FAT image and fails the test on any
// finding.
func fsck(t *testing.T, image string) {
	t.Helper()
	out, err := exec.Command("fsck.vfat", "-n", image).CombinedOutput()
	assert.NoError(t, err, "fsck.vfat -n %s:\n%s", image, out)
}

// TestFATStateMachine drives the slots on a FAT32 ESP written by
// go-diskfs, and checks the result with fsck.vfat.
func TestFATStateMachine(t *testing.T) {
	esp := newFATESP(t).(*fatFS)
	fsck(t, esp.image)
	kernel, initrd := blob(10, 300_000), blob(11, 900_000)
	stateMachine(t, esp, kernel, initrd)
	fsck(t, esp.image)
}

// TestFATNamesOnDisk checks the names Stage, Bless and MarkBad leave in
// the directory entries, as a FAT driver that is not go-diskfs reads
// them: through fsck.vfat's listing.
func TestFATNamesOnDisk(t *testing.T) {
	esp := newFATESP(t).(*fatFS)
	_, err := Stage(esp, "b", Update{Kernel: bytes.NewReader(blob(1, 9000)), Initrd: bytes.NewReader(blob(2, 9000)), Options: builderOptions})
	require.NoError(t, err)
	out, err := exec.Command("fsck.vfat", "-n", "-l", esp.image).CombinedOutput()
	require.NoError(t, err, "fsck.vfat -n -l:\n%s", out)
	for _, p := range []string{"/loader/entries/etcdbox-a.conf", "/loader/entries/etcdbox-b+3.conf", "/etcdbox/b/vmlinuz", "/etcdbox/b/initrd"} {
		assert.Contains(t, string(out), "Checking file "+p, "fsck.vfat -l lists %s", p)
	}
	assert.NotContains(t, string(out), ".tmp")
}
