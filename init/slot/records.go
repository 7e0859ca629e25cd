package slot

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// A slot's records are small files next to its directory on the ESP
// (etcdbox/<slot>.<kind>) that keep what the node learned about the slot:
//
//   - failed: why the init gave the slot up (MarkBad's reason), so that
//     the old slot, booted again, can report it and a roll stop with it;
//   - reached: the boot step a slot on probation last started, for a
//     failure that left no reason (a panic, a hang, a crash of the init);
//   - image: which image was staged into it, with the digests of its
//     boot files, so that a staging of the same image reuses the slot;
//   - cmdline: the kernel command-line extras its image brought, so that
//     the next upgrade, booted from the slot, can leave them out.
//
// ClearRecords removes the first three before a slot is staged again.
const (
	recFailed  = "failed"
	recReached = "reached"
	recImage   = "image"
	recCmdline = "cmdline"
)

func record(slot, kind string) string { return slotsDir + "/" + slot + "." + kind }

// FailedRecord, ReachedRecord, ImageRecord and CmdlineRecord are the
// paths of slot's records.
func FailedRecord(slot string) string  { return record(slot, recFailed) }
func ReachedRecord(slot string) string { return record(slot, recReached) }
func ImageRecord(slot string) string   { return record(slot, recImage) }
func CmdlineRecord(slot string) string { return record(slot, recCmdline) }

// KernelFile and InitrdFile are the paths of slot's boot files.
func KernelFile(slot string) string { return kernelPath(slot) }
func InitrdFile(slot string) string { return initrdPath(slot) }

// WriteRecord writes text, one line, to the record at path.
func WriteRecord(fsys FS, path, text string) error {
	if err := fsys.WriteFile(path, strings.NewReader(text+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadRecord returns the text of the record at path, trimmed; "" when
// there is none.
func ReadRecord(fsys FS, path string) (string, error) {
	b, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ClearRecords removes slot's failure, reached-step and image records: a
// new try of the slot starts without the old reason it failed, or the
// step its last boot reached, or the record of what it held.
func ClearRecords(fsys FS, slot string) error {
	for _, rec := range []string{FailedRecord(slot), ReachedRecord(slot), ImageRecord(slot)} {
		if err := fsys.Remove(rec); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", rec, err)
		}
	}
	return nil
}

// Image is the content of an image record: which image a slot holds.
type Image struct {
	Digest         string // the image's manifest digest
	Kernel, Initrd string // sha256 of vmlinuz and initrd, hex
}

func (r Image) String() string {
	return fmt.Sprintf("image %s\nvmlinuz %s\ninitrd %s\n", r.Digest, r.Kernel, r.Initrd)
}

// WriteImage records that slot holds r; written after the slot's files
// and entry, removed (ClearRecords) before the slot is touched again.
func WriteImage(fsys FS, slot string, r Image) error {
	if err := fsys.WriteFile(ImageRecord(slot), strings.NewReader(r.String())); err != nil {
		return fmt.Errorf("write %s: %w", ImageRecord(slot), err)
	}
	return nil
}

// ReadImage reads slot's image record; a missing or malformed one reads
// as no image.
func ReadImage(fsys FS, slot string) (Image, error) {
	b, err := fsys.ReadFile(ImageRecord(slot))
	if errors.Is(err, fs.ErrNotExist) {
		return Image{}, nil
	}
	if err != nil {
		return Image{}, fmt.Errorf("read %s: %w", ImageRecord(slot), err)
	}
	var r Image
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "image":
			r.Digest = v
		case "vmlinuz":
			r.Kernel = v
		case "initrd":
			r.Initrd = v
		}
	}
	if r.Digest == "" || len(r.Kernel) != 64 || len(r.Initrd) != 64 {
		return Image{}, nil
	}
	return r, nil
}

// LastRollback says why the slot that is not booted was given up, when it
// is bad: its failure record, else how far its last boot got.
func LastRollback(fsys FS, st State, booted string) string {
	other := Other(booted)
	if other == "" || st.Slots[other].Status() != Bad {
		return ""
	}
	if why, err := ReadRecord(fsys, FailedRecord(other)); err == nil && why != "" {
		return "slot " + other + ": " + why
	}
	const none = ": bad, no reason recorded (kernel panic, hang or crash loop)"
	if step, err := ReadRecord(fsys, ReachedRecord(other)); err == nil && step != "" {
		return "slot " + other + none + "; its last boot reached " + strconv.Quote(step)
	}
	return "slot " + other + none + "; its last boot never mounted the ESP (the kernel, a missing disk driver, or the init before that step)"
}
