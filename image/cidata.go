package image

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
)

// CidataLabel is the volume label of a NoCloud seed volume.
const CidataLabel = "cidata"

// cidataSize is the size of a cidata volume: the smallest FAT32 go-diskfs
// makes with 512-byte clusters is about 33 MiB; the file is sparse.
const cidataSize = 40 << 20

// WriteCidata writes a NoCloud seed volume to path, in the layout
// cloud-localds makes: one FAT filesystem labelled "cidata" without a
// partition table, holding user-data (the seed YAML) and meta-data. It
// is written to a temporary file and renamed, and equal inputs give equal
// bytes.
func WriteCidata(path string, userData, metaData []byte, epoch int64) error {
	return writeSeedVolume(path, CidataLabel, []espFile{{"meta-data", metaData}, {"user-data", userData}}, epoch)
}

// ConfigDriveLabel is the volume label of an OpenStack config drive.
const ConfigDriveLabel = "config-2"

// WriteConfigDrive writes an OpenStack config drive to path: one FAT
// filesystem labelled "config-2" holding openstack/latest/meta_data.json
// and, when userData is not nil, openstack/latest/user_data (the seed
// YAML), as Nova writes it in its vfat form. Like WriteCidata, atomic,
// private, and reproducible.
func WriteConfigDrive(path string, userData, metaDataJSON []byte, epoch int64) error {
	files := []espFile{{"openstack/latest/meta_data.json", metaDataJSON}}
	if userData != nil {
		files = append(files, espFile{"openstack/latest/user_data", userData})
	}
	return writeSeedVolume(path, ConfigDriveLabel, files, epoch)
}

// writeSeedVolume writes a FAT32 volume labelled label, without a
// partition table, holding files.
func writeSeedVolume(path, label string, files []espFile, epoch int64) (err error) {
	f, out, err := pendingFile(path)
	if err != nil {
		return err
	}
	out.secret = true // the seed holds a private key
	defer func() {
		if err != nil {
			f.Close()
			out.abort()
		}
	}()
	if err := f.Truncate(cidataSize); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	d, err := diskfs.OpenBackend(file.New(f, false))
	if err != nil {
		return fmt.Errorf("open %s: %w", f.Name(), err)
	}
	err = withFATTime(epoch, func() error {
		fs, err := d.CreateFilesystem(disk.FilesystemSpec{
			Partition: 0, FSType: filesystem.TypeFat32, VolumeLabel: label, Reproducible: true,
		})
		if err != nil {
			return fmt.Errorf("create FAT32: %w", err)
		}
		return writeESP(fs, files)
	})
	if err != nil {
		return fmt.Errorf("write %s volume: %w", label, err)
	}
	h := sha256.New()
	for _, file := range files {
		h.Write(file.data)
	}
	if err := fixFAT32(f, 0, binary.BigEndian.Uint32(h.Sum(nil)[:4])); err != nil {
		return fmt.Errorf("write %s volume: %w", label, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	return out.commit()
}
