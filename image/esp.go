package image

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/diskfs/go-diskfs/filesystem"
)

// The boot files of the ESP (DESIGN §3). The builder writes a blessed
// slot a: its entry has no try counter.
const (
	bootloaderPath = "EFI/BOOT/BOOTX64.EFI"
	loaderConfPath = "loader/loader.conf"
	entryPath      = "loader/entries/etcdbox-a.conf"
	kernelPath     = "etcdbox/a/vmlinuz"
	initrdPath     = "etcdbox/a/initrd"

	// loaderConf keeps default a pattern: systemd-boot then picks the
	// highest version among the etcdbox entries it has not marked bad,
	// which is what A/B rollback relies on. Editing and the firmware and
	// auto entries are off so a console user cannot bypass the slots.
	loaderConf = "default etcdbox-*\ntimeout 0\neditor no\nauto-entries no\nauto-firmware no\n"
)

// MaxCmdline is the longest kernel command line an x86-64 kernel takes
// whole: COMMAND_LINE_SIZE (2048) less its terminating NUL. The EFI stub
// and the boot protocol cut a longer one off, silently.
const MaxCmdline = 2047

// bootOptions is the kernel command line of slot a's entry: the
// builder's own arguments, then the extras.
func bootOptions(extra string) string {
	opts := "console=ttyS0,115200 panic=10 etcdbox.slot=a"
	if extra = strings.TrimSpace(extra); extra != "" {
		opts += " " + extra
	}
	return opts
}

// bootEntry is the systemd-boot entry of slot a, generation 1.
func bootEntry(extra string) string {
	return "title etcdbox (slot a)\nversion 1\nsort-key etcdbox\n" +
		"linux /" + kernelPath + "\ninitrd /" + initrdPath + "\noptions " + bootOptions(extra) + "\n"
}

// An espFile is one file to put on the ESP.
type espFile struct {
	path string
	data []byte
}

// fatEpoch is 1980-01-01T00:00:00Z, the earliest time a FAT directory
// entry can hold.
const fatEpoch = 315532800

// fatTimeMu serialises the SOURCE_DATE_EPOCH override of withFATTime.
var fatTimeMu sync.Mutex

// withFATTime runs fn with SOURCE_DATE_EPOCH set to epoch (raised to the
// FAT epoch). go-diskfs v1.9.4 stamps every FAT directory entry, "." and
// ".." included, with util/timestamp.GetTime, which reads only that
// environment variable and otherwise uses the wall clock; setting it is
// the one way to make the ESP reproducible for an epoch given in Config.
func withFATTime(epoch int64, fn func() error) error {
	fatTimeMu.Lock()
	defer fatTimeMu.Unlock()
	old, had := os.LookupEnv("SOURCE_DATE_EPOCH")
	if err := os.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(max(epoch, fatEpoch), 10)); err != nil {
		return err
	}
	defer func() {
		if had {
			os.Setenv("SOURCE_DATE_EPOCH", old)
		} else {
			os.Unsetenv("SOURCE_DATE_EPOCH")
		}
	}()
	return fn()
}

// writeESP creates the directories of files and writes each file with a
// single Write: go-diskfs rewrites both FATs on every Write call, so
// chunked copies would be slow.
func writeESP(fs filesystem.FileSystem, files []espFile) error {
	made := map[string]bool{}
	for _, f := range files {
		dir := path.Dir(f.path)
		if dir != "." && !made[dir] {
			if err := fs.Mkdir("/" + dir); err != nil {
				return fmt.Errorf("mkdir /%s: %w", dir, err)
			}
			made[dir] = true
		}
		fh, err := fs.OpenFile("/"+f.path, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("create /%s: %w", f.path, err)
		}
		n, err := fh.Write(f.data)
		if err == nil && n != len(f.data) {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(f.data))
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write /%s: %w", f.path, err)
		}
	}
	return nil
}
