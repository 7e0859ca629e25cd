package image

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/google/uuid"
)

// Disk layout (DESIGN §3): GPT with 1 MiB-aligned partitions.
const (
	sector   = 512
	mib      = 1 << 20
	espStart = 1 * mib
	espSize  = 512 * mib
	dataSize = 64 * mib

	// MinSize is the smallest raw disk: the GPT and alignment gap, the
	// ESP, the DATA placeholder, and a MiB at the end for the backup GPT.
	MinSize = espStart + espSize + dataSize + mib
	// DefaultSize is the raw disk size when Config.Size is 0. The image
	// is sparse; the node grows DATA to the end of whatever disk it is
	// written to.
	DefaultSize = 1 << 30

	espLabel  = "ETCDBOX-ESP"
	dataLabel = "ETCDBOX-DATA"
)

// guidSpace is the UUIDv5 namespace of etcdbox's GPT GUIDs.
var guidSpace = uuid.MustParse("6a1f3c52-5e0b-4d52-9f57-2f1d3e7c0b11")

// guids derives the disk and partition GUIDs from a digest of the image
// content, so that equal inputs give equal disks (go-diskfs picks random
// GUIDs when they are left blank) and different images differ.
func guids(content [sha256.Size]byte) (diskGUID, esp, data string) {
	g := func(what string) string { return uuid.NewSHA1(guidSpace, append(content[:], what...)).String() }
	return g("disk"), g(espLabel), g(dataLabel)
}

// partitionTable returns the GPT of a disk of size bytes.
func partitionTable(content [sha256.Size]byte) *gpt.Table {
	diskGUID, espGUID, dataGUID := guids(content)
	return &gpt.Table{
		LogicalSectorSize:  sector,
		PhysicalSectorSize: sector,
		ProtectiveMBR:      true,
		GUID:               diskGUID,
		Partitions: []*gpt.Partition{
			{Index: 1, Start: espStart / sector, Size: espSize, Type: gpt.EFISystemPartition, Name: espLabel, GUID: espGUID},
			{Index: 2, Start: (espStart + espSize) / sector, Size: dataSize, Type: gpt.LinuxFilesystem, Name: dataLabel, GUID: dataGUID},
		},
	}
}

// espFiles returns the ESP content of cfg with the given initrd.
func espFiles(cfg Config, initrd []byte) ([]espFile, error) {
	boot, err := fileBytes("bootloader", cfg.Bootloader)
	if err != nil {
		return nil, err
	}
	kernel, err := fileBytes("kernel", cfg.Kernel)
	if err != nil {
		return nil, err
	}
	files := []espFile{
		{bootloaderPath, boot},
		{loaderConfPath, []byte(loaderConf)},
		{entryPath, []byte(bootEntry(cfg.Cmdline))},
		{kernelPath, kernel},
		{initrdPath, initrd},
	}
	// An upgrade stages slot b next to slot a, so a slot may take at most
	// half of what the bootloader leaves free (with room for the FATs).
	slot := int64(len(kernel) + len(initrd))
	if free := int64(espSize-4*mib-len(boot)) / 2; slot > free {
		return nil, fmt.Errorf("kernel %s and initrd take %d MiB; at most %d MiB fit in the %d MiB ESP next to a second slot",
			cfg.Kernel, slot>>20, free>>20, espSize>>20)
	}
	return files, nil
}

// writeRaw writes the GPT disk image of cfg to cfg.Output.
func writeRaw(ctx context.Context, cfg Config, initrd []byte) (err error) {
	files, err := espFiles(cfg, initrd)
	if err != nil {
		return err
	}
	h := sha256.New()
	fmt.Fprintf(h, "etcdbox raw %d %d\n", cfg.Size, cfg.SourceDateEpoch)
	for _, f := range files {
		fmt.Fprintf(h, "%s %d\n", f.path, len(f.data))
		h.Write(f.data)
	}
	var content [sha256.Size]byte
	copy(content[:], h.Sum(nil))

	f, out, err := pendingFile(cfg.Output)
	if err != nil {
		return err
	}
	out.secret = cfg.Seed != "" // a baked seed holds a private key
	defer func() {
		if err != nil {
			f.Close()
			out.abort()
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	// A sparse file: the DATA placeholder and the free ESP space are
	// holes that read as the zeros init expects on first boot.
	if err := f.Truncate(cfg.Size); err != nil {
		return fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	d, err := diskfs.OpenBackend(file.New(f, false))
	if err != nil {
		return fmt.Errorf("open disk %s: %w", f.Name(), err)
	}
	if err := d.Partition(partitionTable(content)); err != nil {
		return fmt.Errorf("write partition table: %w", err)
	}
	err = withFATTime(cfg.SourceDateEpoch, func() error {
		fs, err := d.CreateFilesystem(disk.FilesystemSpec{
			Partition: 1, FSType: filesystem.TypeFat32, VolumeLabel: espLabel, Reproducible: true,
		})
		if err != nil {
			return fmt.Errorf("create FAT32: %w", err)
		}
		return writeESP(fs, files)
	})
	if err == nil {
		err = fixFAT32(f, espStart, binary.BigEndian.Uint32(content[:4]))
	}
	if err != nil {
		return fmt.Errorf("write ESP: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	return out.commit()
}
