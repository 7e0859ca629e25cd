package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// ZstdNone, as Config.Zstd, makes CompressionSmall use the built-in
// encoder even where a zstd program is installed.
const ZstdNone = "none"

// zstdArgs are the zstd program's arguments for CompressionSmall: level
// 19 on one thread, so that the bytes depend only on the archive and the
// program's version. Level 19's own window is 8 MiB; wide, for a member
// whose files share code further apart than that (/init and a separate
// etcd, side by side), adds --long=25: a 32 MiB window (smallWindow,
// which the kernel's unpacker allocates) that reaches from etcd back
// across /init.
//
// Measured on the host (session 33), /init's archive (28.2 MB): level 19
// 8,292,565 bytes, decoded ten times in 1.10 s; with --long=25 8,283,998
// bytes in 1.55 s, as slow as the built-in encoder's best with its 32 MiB
// window (9,366,474 bytes, 1.57 s); the modules' and tools' archive
// (12.7 MB) 177 bytes larger without --long, decoded 19% faster. A long
// window costs the unpack (every boot) far more than it saves in bytes,
// unless two Go programs share it. Levels 20-22 (--ultra) made /init's
// archive 2 KB smaller in as much time again; level 17, 4% larger.
func zstdArgs(wide bool) []string {
	args := []string{"-19", "--single-thread"}
	if wide {
		args = append(args, "--long=25")
	}
	return args
}

// zstdProgram is a zstd program the build compresses with.
type zstdProgram struct {
	path    string
	version string // "1.5.4"
}

// id names the program and its setting for a member, wide or not, as the
// cache keys and the build's report do.
func (p *zstdProgram) id(wide bool) string {
	return "zstd " + p.version + " " + strings.Join(zstdArgs(wide), " ")
}

var zstdVersion = regexp.MustCompile(`v(\d+\.\d+\.\d+)`)

// findZstd returns the zstd program setting names (Config.Zstd): "" the
// one on PATH, if any works; ZstdNone none; else that file, which must
// work. A program found on PATH that does not work (too old for
// --single-thread, say) is passed over, and why says why: the build
// falls back to the built-in encoder. A program named outright that does
// not work is an error.
func findZstd(ctx context.Context, setting string) (p *zstdProgram, why string, err error) {
	switch setting {
	case ZstdNone:
		return nil, "zstd: " + ZstdNone, nil
	case "":
		path, err := exec.LookPath("zstd")
		if err != nil {
			return nil, "no zstd program on PATH", nil
		}
		p, err := probeZstd(ctx, path)
		if err != nil {
			return nil, err.Error(), nil
		}
		return p, "", nil
	}
	p, err = probeZstd(ctx, setting)
	return p, "", err
}

// probeZstd checks that the program at path reports a version and
// compresses with zstdArgs (wide: every argument it is given) into a
// frame the built-in decoder reads back.
func probeZstd(ctx context.Context, path string) (*zstdProgram, error) {
	out, err := exec.CommandContext(ctx, path, "-V").Output()
	if err != nil {
		return nil, fmt.Errorf("zstd program %s: -V: %w", path, err)
	}
	m := zstdVersion.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("zstd program %s: -V printed %q: no version in it", path, strings.TrimSpace(string(out)))
	}
	p := &zstdProgram{path: path, version: string(m[1])}
	probe := []byte("etcdbox probe of the zstd program\n")
	if _, err := p.compress(ctx, probe, true); err != nil {
		return nil, err
	}
	return p, nil
}

// compress runs the program on archive, with a wide window or not, and
// returns its frame, checked: the built-in decoder, held to the kernel's
// window, must give archive back. A program that writes anything else
// fails the build rather than the boot.
func (p *zstdProgram) compress(ctx context.Context, archive []byte, wide bool) ([]byte, error) {
	args := zstdArgs(wide)
	cmd := exec.CommandContext(ctx, p.path, append(slices.Clone(args), "-q", "-c")...)
	cmd.Stdin = bytes.NewReader(archive)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("zstd program %s %s: %w: %s", p.path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := checkFrame(out.Bytes(), archive); err != nil {
		return nil, fmt.Errorf("zstd program %s %s: %w", p.path, strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

// errFrameMismatch is checkFrame's error for a frame that decodes, but
// not to the archive.
var errFrameMismatch = errors.New("its output does not decode to its input")

// checkFrame decodes frame with the built-in decoder, limited to the
// window the kernel allocates (smallWindow), and compares the result with
// archive.
func checkFrame(frame, archive []byte) error {
	// The memory limit also bounds the output: a frame that would decode
	// to far more than archive stops early.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(smallWindow),
		zstd.WithDecoderMaxMemory(uint64(max(len(archive), smallWindow))+1))
	if err != nil {
		return err
	}
	defer d.Close()
	got, err := d.DecodeAll(frame, make([]byte, 0, len(archive)))
	if err != nil {
		return fmt.Errorf("its output does not decode: %w", err)
	}
	if !bytes.Equal(got, archive) {
		return errFrameMismatch
	}
	return nil
}
