package slot

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// FS is the ESP as the slot state machine needs it. Names are
// slash-separated and relative to the ESP root, as in io/fs
// ("loader/entries/etcdbox-a.conf").
//
// Every mutating method returns only once its change is on the disk: the
// crash safety of Stage rests on that order.
type FS interface {
	// ReadDir lists the directory name. A missing directory is an error
	// that matches fs.ErrNotExist.
	ReadDir(name string) ([]fs.DirEntry, error)
	// ReadFile returns the content of the file name.
	ReadFile(name string) ([]byte, error)
	// WriteFile creates or truncates the file name, copies r into it and
	// flushes it to the disk. It need not be atomic: Stage writes to a
	// temporary name and renames.
	WriteFile(name string, r io.Reader) error
	// Rename renames oldname to newname in the same directory, replacing
	// newname, and flushes both the renamed file and the directory.
	Rename(oldname, newname string) error
	// Remove removes the file name and flushes its directory. A missing
	// file is an error that matches fs.ErrNotExist.
	Remove(name string) error
	// Mkdir creates the directory name and flushes its parent; an
	// existing directory is not an error.
	Mkdir(name string) error
}

// Dir is the FS of a mounted ESP, the directory it names (like
// http.Dir): Dir("/boot/efi").
type Dir string

var _ FS = Dir("")

// path returns the host path of name, which must be an io/fs path.
func (d Dir) path(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(string(d), filepath.FromSlash(name)), nil
}

// ReadDir implements FS.
func (d Dir) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := d.path("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

// ReadFile implements FS.
func (d Dir) ReadFile(name string) ([]byte, error) {
	p, err := d.path("read", name)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// sourceReader remembers the error of the reader WriteFile copies from,
// to tell it from an error writing the file.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// WriteFile implements FS: the data and the file's clusters are flushed
// with fsync before it returns.
func (d Dir) WriteFile(name string, r io.Reader) (err error) {
	p, err := d.path("write", name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	src := &sourceReader{r: r}
	if _, err := io.Copy(f, src); err != nil {
		if src.err != nil {
			return &fs.PathError{Op: "copy to", Path: p, Err: src.err}
		}
		return err
	}
	return f.Sync()
}

// Rename implements FS. On vfat a rename writes the new directory entry
// with no size and no first cluster; the file's own inode fills them in
// only when it is written back, which a flush of the directory does not
// do. A power cut after a bless then left etcdbox-b.conf empty, and the
// host's reads of a running guest's disk showed it so for many seconds.
// So Rename flushes the renamed file first (its entry, whole), then the
// directory (the old name's removal).
func (d Dir) Rename(oldname, newname string) error {
	op, err := d.path("rename", oldname)
	if err != nil {
		return err
	}
	np, err := d.path("rename", newname)
	if err != nil {
		return err
	}
	if path.Dir(oldname) != path.Dir(newname) {
		return &os.LinkError{Op: "rename", Old: op, New: np, Err: errors.New("not in the same directory")}
	}
	if err := os.Rename(op, np); err != nil {
		return err
	}
	if err := syncPath(np); err != nil {
		return err
	}
	return syncDir(filepath.Dir(np))
}

// Remove implements FS.
func (d Dir) Remove(name string) error {
	p, err := d.path("remove", name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

// Mkdir implements FS.
func (d Dir) Mkdir(name string) error {
	p, err := d.path("mkdir", name)
	if err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(p))
}

// syncDir flushes the directory dir, making a rename, removal or creation
// in it durable; on vfat this also flushes the FAT.
func syncDir(dir string) error { return syncPath(dir) }

// syncPath opens the file or directory p and flushes it: its data, and
// its inode (on vfat, its directory entry) and the FAT.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
