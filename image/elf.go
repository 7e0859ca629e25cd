package image

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// libDirs are the directories searched for a DT_NEEDED library, in the
// order of Debian's amd64 dynamic loader (its compiled-in trusted
// directories; the initramfs has no ld.so.cache).
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib",
}

// resolveIn resolves p inside root the way a chroot into root would:
// symlinks are followed, absolute targets and ".." stay below root. It
// returns the host path of the final regular file or directory.
func resolveIn(root, p string) (string, error) {
	if root == "" {
		root = "/"
	}
	todo := strings.Split(p, "/")
	cur := "/"
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("resolve %s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return filepath.Join(root, cur), nil
}

// elfDeps reads the interpreter (PT_INTERP) and the DT_NEEDED and
// DT_RUNPATH/DT_RPATH entries of an ELF file.
func elfDeps(file string) (interp string, needed, runpath []string, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", nil, nil, err
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return "", nil, nil, fmt.Errorf("%s is %v %v, want ELFCLASS64 EM_X86_64", file, f.Class, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, nil, fmt.Errorf("read PT_INTERP of %s: %w", file, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if needed, err = f.DynString(elf.DT_NEEDED); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", nil, nil, fmt.Errorf("read DT_NEEDED of %s: %w", file, err)
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			runpath = append(runpath, filepath.SplitList(v)...)
		}
	}
	return interp, needed, runpath, nil
}

// isAMD64ELF reports whether file is a 64-bit x86 ELF object: the library
// directories of a multiarch host also hold i386 or x32 libraries.
func isAMD64ELF(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_X86_64
}

// sharedLibs returns what the dynamically linked programs bins (paths
// inside root) need at run time: their ELF interpreter and the transitive
// closure of their DT_NEEDED libraries. The map goes from the path the
// loader will look up (where the file must be in the initramfs) to the
// host file holding it, symlinks resolved, so the initramfs stores regular
// files exactly where the loader asks for them.
func sharedLibs(root string, bins []string) (map[string]string, error) {
	out := map[string]string{}
	var visit func(inRoot, host string) error
	visit = func(inRoot, host string) error {
		interp, needed, runpath, err := elfDeps(host)
		if err != nil {
			return err
		}
		if interp != "" && out[interp] == "" {
			h, err := resolveIn(root, interp)
			if err != nil {
				return fmt.Errorf("interpreter %s of %s: %w", interp, inRoot, err)
			}
			out[interp] = h
		}
		for _, lib := range needed {
			dest, h, err := findLib(root, lib, runpath, path.Dir(inRoot))
			if err != nil {
				return fmt.Errorf("library %s needed by %s: %w", lib, inRoot, err)
			}
			if _, done := out[dest]; done {
				continue
			}
			out[dest] = h
			if err := visit(dest, h); err != nil {
				return err
			}
		}
		return nil
	}
	for _, b := range bins {
		h, err := resolveIn(root, b)
		if err != nil {
			return nil, err
		}
		if err := visit(b, h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// findLib searches runpath (with $ORIGIN expanded) and libDirs for lib.
func findLib(root, lib string, runpath []string, origin string) (dest, host string, err error) {
	if strings.Contains(lib, "/") {
		h, err := resolveIn(root, lib)
		return lib, h, err
	}
	dirs := make([]string, 0, len(runpath)+len(libDirs))
	for _, d := range runpath {
		dirs = append(dirs, strings.NewReplacer("$ORIGIN", origin, "${ORIGIN}", origin).Replace(d))
	}
	dirs = append(dirs, libDirs...)
	for _, d := range dirs {
		p := path.Join(d, lib)
		h, err := resolveIn(root, p)
		if err == nil && isAMD64ELF(h) {
			return p, h, nil
		}
	}
	return "", "", fmt.Errorf("not found in %s under %s", strings.Join(dirs, ", "), root)
}
