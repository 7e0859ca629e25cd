package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/etcdbox/etcdbox/init/supervise"
)

// DefaultToolDir is where the initramfs carries e2fsprogs.
const DefaultToolDir = "/usr/sbin"

// ErrNeedsRepair means e2fsck -p found damage it may not fix without an
// operator. Never format such a filesystem.
var ErrNeedsRepair = errors.New("filesystem needs manual repair")

// State is what Probe found on a partition.
type State int

const (
	// Unknown is anything that is neither ext4 nor blank: never format it.
	Unknown State = iota
	// Blank is the builder's placeholder: the first MiB is all zeros.
	Blank
	// Ext4 has an ext2/3/4 superblock magic.
	Ext4
)

func (s State) String() string {
	switch s {
	case Blank:
		return "blank"
	case Ext4:
		return "ext4"
	}
	return "unknown"
}

const (
	probeBytes = 1 << 20
	sbOffset   = 1024
	sbMagicOff = 0x38 // 1080 from the partition start
	ext4Magic  = 0xEF53
	incompat64 = 0x80
)

// Probe reads the first MiB of dev. It says Ext4 for an ext2/3/4 magic
// (0xEF53 at byte 1080), Blank when every byte is zero, Unknown otherwise
// (including a partition shorter than 1 MiB).
func Probe(dev string) (State, error) {
	f, err := os.Open(dev)
	if err != nil {
		return Unknown, fmt.Errorf("probe %s: %w", dev, err)
	}
	defer f.Close()
	b := make([]byte, probeBytes)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Unknown, fmt.Errorf("probe %s: %w", dev, err)
	}
	b = b[:n]
	if n >= sbOffset+sbMagicOff+2 && binary.LittleEndian.Uint16(b[sbOffset+sbMagicOff:]) == ext4Magic {
		return Ext4, nil
	}
	if n == probeBytes && allZero(b) {
		return Blank, nil
	}
	return Unknown, nil
}

// ext4Size returns the size in bytes of the ext2/3/4 filesystem on dev,
// from its superblock.
func ext4Size(dev string) (int64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, sbOffset); err != nil {
		return 0, fmt.Errorf("read superblock of %s: %w", dev, err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[sbMagicOff:]) != ext4Magic {
		return 0, fmt.Errorf("%s: no ext4 superblock", dev)
	}
	blocks := uint64(le.Uint32(sb[0x04:]))
	if le.Uint32(sb[0x60:])&incompat64 != 0 {
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	logBlock := le.Uint32(sb[0x18:])
	if logBlock > 6 { // 64 KiB blocks at most
		return 0, fmt.Errorf("%s: block size 2^%d", dev, 10+logBlock)
	}
	return int64(blocks) << (10 + logBlock), nil
}

// Tools runs the e2fsprogs binaries.
type Tools struct {
	// Dir holds mke2fs, e2fsck and resize2fs; empty means DefaultToolDir.
	Dir string
	// Run runs a program and returns its combined output and exit code;
	// err is only for a program that could not run or died of a signal.
	// Nil runs it through the reaper (supervise.RunTool). Tests record
	// calls here.
	Run func(name string, args ...string) (out []byte, code int, err error)
}

func (t *Tools) run(tool string, args ...string) ([]byte, int, error) {
	dir := DefaultToolDir
	if t != nil && t.Dir != "" {
		dir = t.Dir
	}
	run := execRun
	if t != nil && t.Run != nil {
		run = t.Run
	}
	return run(filepath.Join(dir, tool), args...)
}

// execRun runs name with a minimal environment: the tools must behave the
// same under PID 1 (empty environment) as in tests.
func execRun(name string, args ...string) ([]byte, int, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=" + filepath.Dir(name), "LANG=C"}
	return supervise.RunTool(context.Background(), cmd)
}

// Mkfs formats dev as ext4 with the given filesystem label. Inode tables
// and the journal are initialised lazily by the kernel after mount, so
// a first boot on a large disk does not wait for them; nodiscard skips a
// TRIM of the whole device, which takes minutes on some cloud volumes and
// buys nothing on a disk that is new.
func (t *Tools) Mkfs(dev, label string) error {
	out, code, err := t.run("mke2fs", "-q", "-F", "-t", "ext4", "-L", label,
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", dev)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		return fmt.Errorf("mke2fs %s: %w: %s", dev, err, trim(out))
	}
	return nil
}

// FsckResult is the outcome of an e2fsck run that did not fail.
type FsckResult struct {
	Code   int    // 0 clean, 1 errors fixed, 2 fixed and a reboot is recommended
	Output string // e2fsck's output, for the log
}

// Fsck runs e2fsck -p (preen: fix what is safe without asking) on dev.
// Exit codes 0, 1 and 2 are success (2 asks to reboot when the
// filesystem was mounted, which DATA is not yet). Any code from 4 up
// (uncorrected errors, operational error, usage, cancel, library error) is
// an error wrapping ErrNeedsRepair with the output: the node must report
// it and leave the data alone.
func (t *Tools) Fsck(dev string) (FsckResult, error) {
	out, code, err := t.run("e2fsck", "-p", dev)
	if err != nil {
		return FsckResult{}, fmt.Errorf("e2fsck -p %s: %w: %s", dev, err, trim(out))
	}
	if code >= 4 || code < 0 {
		return FsckResult{Code: code, Output: string(out)},
			fmt.Errorf("e2fsck -p %s: exit status %d (%s): %w: %s", dev, code, fsckMeaning(code), ErrNeedsRepair, trim(out))
	}
	return FsckResult{Code: code, Output: string(out)}, nil
}

// fsckMeaning decodes e2fsck's exit status bits (e2fsck(8)).
func fsckMeaning(code int) string {
	var m []string
	for _, b := range []struct {
		bit  int
		text string
	}{
		{1, "errors corrected"}, {2, "reboot needed"}, {4, "errors left uncorrected"},
		{8, "operational error"}, {16, "usage or syntax error"}, {32, "canceled"}, {128, "shared library error"},
	} {
		if code&b.bit != 0 {
			m = append(m, b.text)
		}
	}
	return strings.Join(m, ", ")
}

// Grow runs resize2fs on dev to fill its partition. On a mounted ext4 the
// kernel grows it online.
func (t *Tools) Grow(dev string) error {
	out, code, err := t.run("resize2fs", dev)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		return fmt.Errorf("resize2fs %s: %w: %s", dev, err, trim(out))
	}
	return nil
}

func trim(b []byte) string {
	return string(bytes.TrimSpace(b))
}
