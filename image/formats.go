package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The cloud and hypervisor disk formats. Each is the raw GPT disk
// (FormatRaw) in another container; its disk reads back to the raw
// image's bytes. qcow2 and vmdk are written by the host's qemu-img
// (hack/deps.sh installs qemu-utils): its writers are the reference
// implementation QEMU itself reads, and a pure-Go qcow2 or
// stream-optimized VMDK writer would be a second, less tried one. vhd and
// gce are simple enough to write here: a footer, and a tarball.
const (
	// FormatQCOW2 is a qcow2 (v3) disk for QEMU/KVM, libvirt and
	// OpenStack.
	FormatQCOW2 Format = "qcow2"
	// FormatVHD is a fixed VHD for Azure: the raw disk and a 512-byte
	// footer, its virtual size a whole number of MiB.
	FormatVHD Format = "vhd"
	// FormatGCE is disk.raw in a gzipped GNU tarball, as GCE imports it;
	// its size is a whole number of GiB, as GCE requires.
	FormatGCE Format = "gce"
	// FormatVMDK is a stream-optimized VMDK for vSphere and OVA.
	FormatVMDK Format = "vmdk"
)

// Formats lists every output format, in the order help texts show them.
var Formats = []Format{FormatRaw, FormatOCI, FormatQCOW2, FormatVHD, FormatGCE, FormatVMDK}

// FormatNames lists Formats for help and errors: "raw, oci, ...".
func FormatNames() string {
	s := make([]string, len(Formats))
	for i, f := range Formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// sizeUnit is the unit a format's disk size is rounded up to: Azure
// takes only VHDs of whole MiB, GCE only disks of whole GiB. Other sizes
// are taken as given (and must be whole sectors).
func (f Format) sizeUnit() int64 {
	switch f {
	case FormatVHD:
		return mib
	case FormatGCE:
		return 1 << 30
	}
	return 1
}

// qemuImg is the host tool the qcow2 and vmdk formats need.
const qemuImg = "qemu-img"

// writeConverted writes cfg's raw disk under a temporary name next to
// cfg.Output, then the format cfg.Format asks for from it.
func writeConverted(ctx context.Context, cfg Config, initrd []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(cfg.Output), "."+filepath.Base(cfg.Output)+".raw-*")
	if err != nil {
		return fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	rawCfg := cfg
	rawCfg.Output = tmp.Name()
	if err := writeRaw(ctx, rawCfg, initrd); err != nil {
		return err
	}
	f, out, err := pendingFile(cfg.Output)
	if err != nil {
		return err
	}
	out.secret = cfg.Seed != ""
	f.Close()
	switch cfg.Format {
	case FormatQCOW2:
		err = convertQemuImg(ctx, tmp.Name(), out.tmp, "qcow2", "compat=1.1")
	case FormatVMDK:
		err = convertQemuImg(ctx, tmp.Name(), out.tmp, "vmdk", "subformat=streamOptimized")
		if err == nil {
			err = fixVMDKDescriptor(out.tmp, filepath.Base(cfg.Output))
		}
	case FormatVHD:
		err = writeVHD(tmp.Name(), out.tmp, cfg.SourceDateEpoch)
	case FormatGCE:
		err = writeGCE(ctx, tmp.Name(), out.tmp, cfg.SourceDateEpoch)
	default:
		err = fmt.Errorf("format %q is not a converted disk", cfg.Format)
	}
	if err != nil {
		out.abort()
		return fmt.Errorf("output %s (%s): %w", cfg.Output, cfg.Format, err)
	}
	return out.commit()
}

// convertQemuImg converts the raw disk src to dst in format fmt.
func convertQemuImg(ctx context.Context, src, dst, format, opts string) error {
	if _, err := exec.LookPath(qemuImg); err != nil {
		return fmt.Errorf("--format %s needs %s on the host (Debian: apt-get install qemu-utils): %w", format, qemuImg, err)
	}
	cmd := exec.CommandContext(ctx, qemuImg, "convert", "-q", "-f", "raw", "-O", format, "-o", opts, src, dst)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s convert: %w: %s", qemuImg, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// fixVMDKDescriptor makes qemu-img's stream-optimized VMDK reproducible
// and self-consistent: qemu-img draws the descriptor's content ID (CID)
// at random, and names the extent after the temporary file it wrote.
// The descriptor is text in a fixed space near the file's start (its
// sector and size are in the sparse extent header); the new one names
// the final file and takes its CID from the grains, which hold the
// disk's content.
func fixVMDKDescriptor(path, base string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var hdr [512]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fmt.Errorf("read VMDK header: %w", err)
	}
	if string(hdr[:4]) != "KDMV" {
		return fmt.Errorf("not a VMDK: magic %q", hdr[:4])
	}
	descOff := int64(binary.LittleEndian.Uint64(hdr[28:])) * sector
	descLen := int64(binary.LittleEndian.Uint64(hdr[36:])) * sector
	if descOff == 0 || descLen == 0 || descLen > mib {
		return fmt.Errorf("VMDK header: no embedded descriptor (offset %d, size %d)", descOff, descLen)
	}
	desc := make([]byte, descLen)
	if _, err := f.ReadAt(desc, descOff); err != nil {
		return fmt.Errorf("read VMDK descriptor: %w", err)
	}
	h := sha256.New()
	if _, err := f.Seek(descOff+descLen, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("read VMDK grains: %w", err)
	}
	cid := fmt.Sprintf("%08x", binary.BigEndian.Uint32(h.Sum(nil)))
	text := string(bytes.TrimRight(desc, "\x00"))
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		switch {
		case strings.HasPrefix(l, "CID="):
			l = "CID=" + cid
		case strings.HasPrefix(l, "RW ") && strings.Contains(l, `"`):
			// RW <sectors> SPARSE "<file>"
			l = l[:strings.Index(l, `"`)] + `"` + strings.ReplaceAll(base, `"`, "_") + `"`
		}
		lines = append(lines, l)
	}
	out := []byte(strings.Join(lines, "\n"))
	if int64(len(out)) > descLen {
		return fmt.Errorf("VMDK descriptor: %d bytes do not fit its %d", len(out), descLen)
	}
	padded := make([]byte, descLen)
	copy(padded, out)
	if _, err := f.WriteAt(padded, descOff); err != nil {
		return fmt.Errorf("write VMDK descriptor: %w", err)
	}
	return f.Sync()
}

// gceDiskName is the one file of a GCE image tarball.
const gceDiskName = "disk.raw"

// writeGCE writes src as disk.raw in a gzipped tarball of the GNU
// format, as GCE's image import requires.
func writeGCE(ctx context.Context, src, dst string, epoch int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	// No name and a fixed time in the gzip header: equal disks give
	// equal bytes.
	zw, err := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if err != nil {
		return err
	}
	zw.ModTime = time.Unix(epoch, 0)
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: gceDiskName, Size: fi.Size(), Mode: 0o644,
		ModTime: time.Unix(epoch, 0), Format: tar.FormatGNU,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, ctxReader{ctx, in}); err != nil {
		return err
	}
	for _, c := range []io.Closer{tw, zw} {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return out.Sync()
}

// ctxReader ends a long copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
