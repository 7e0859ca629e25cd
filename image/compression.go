package image

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Compression is how hard the initrd is compressed. Both are zstd, which
// the kernel unpacks (CONFIG_RD_ZSTD) about as fast at any level; they
// differ in the build's time and the initrd's size.
type Compression string

const (
	// CompressionSmall, the default, is zstd level 19 by the host's zstd
	// program, else the built-in encoder's best level with a 32 MiB
	// window (see the end of this comment). The history: measured on the
	// initramfs of commit c9d83c6's parts (56 MiB of cpio, Debian 6.1
	// kernel, software emulation, 1 vCPU):
	//
	//	setting                       initrd    build   kernel unpack
	//	zstd default (fast)           20.0 MiB  0.9 s   0.8-0.9 s
	//	zstd best, 32 MiB window      14.5 MiB  4.4 s   0.9-1.1 s
	//	zstd -19 --long (host CLI)    12.7 MiB  33 s    0.95-1.0 s
	//	xz -9e (host CLI)             11.4 MiB  34 s    3.4-3.5 s
	//
	// Most of the saving is the window: /init and etcd are both Go
	// binaries with the same standard library, gRPC and protobuf, so a
	// window that reaches from one into the other finds etcd's code
	// again in /init's (the initrd puts them side by side, see
	// cpioParts). Every boot pays the unpack; every upgrade pulls,
	// writes, and (kexec) hashes the initrd, so its size counts on the
	// upgrade path too. xz would meet a 20 MiB kernel+initrd goal but
	// costs 2.6 s more on every boot under emulation, so it is not used.
	//
	// Since /init carries etcd (one Go program where there were two,
	// init/runetcd.go), the same parts make 41.0 MB of cpio (host, 2
	// cores, klauspost/compress):
	//
	//	zstd default (fast)           13.7 MiB  0.2-0.3 s
	//	zstd better                   13.1 MiB  0.6-0.7 s
	//	zstd best, 8 or 32 MiB window 12.3 MiB  2.9-3.0 s
	//
	// The window matters only for an image given a separate etcd (another
	// version); best stays the default, for the bytes every upgrade
	// pulls, writes and hashes. The initrd is members compressed at once
	// (cpioParts): the modules and tools, /init, and the image's own
	// files.
	//
	// The built-in encoder's best is about zstd's level 12. Where the
	// host has a zstd program (Config.Zstd), CompressionSmall runs it at
	// level 19 (zstdArgs), on the same parts (session 33, commit
	// 0c63934's /init, host, one thread per member):
	//
	//	encoder                       initrd     kernel+initrd  build
	//	built-in best                 12.33 MiB  20.20 MiB      2 s
	//	zstd program -19              10.87 MiB  18.73 MiB      15-21 s
	//
	// That meets issue 17's 20 MiB for the kernel and initrd, and every
	// upgrade pulls, writes and hashes 1.5 MB less. Level 19's own 8 MiB
	// window also makes the unpack faster: the decoder's time goes with
	// the window's reach more than with the level (zstdArgs). The
	// program's 15 s over /init is paid once per binary: its frames are
	// cached by content (memberCache), so a build from the same binaries
	// takes about a second. The bytes depend on the program's version;
	// equal inputs and program give equal images.
	CompressionSmall Compression = "small"
	// CompressionFast is zstd's default level: a tenth more bytes (a
	// third when etcd was a binary of its own), built in a tenth of the
	// time, for quick rebuilds while developing.
	CompressionFast Compression = "fast"
)

// encoderPipeline is the zstd stream encoder's concurrency: a fixed 2,
// not the machine's core count, so every machine runs the same code path.
const encoderPipeline = 2

// smallWindow is CompressionSmall's window: in an image given a separate
// etcd it must reach from etcd back into /init, so it must be larger than
// /init (28 MB today). With the init's own etcd there is one binary, and
// an 8 MiB window compresses it as small.
const smallWindow = 32 << 20

// check validates c, filling in the default.
func (c Compression) check() (Compression, error) {
	switch c {
	case "":
		return CompressionSmall, nil
	case CompressionSmall, CompressionFast:
		return c, nil
	}
	return c, fmt.Errorf("compression %q: want %q or %q", string(c), CompressionSmall, CompressionFast)
}

// writer returns the zstd encoder of c on w. It runs the stream's
// pipeline, encoderPipeline goroutines: while one block's entropy coding
// and write run, the next block's matches are found. One encoder still
// takes the blocks one after another, with the state of the one before,
// so the bytes are those of a single goroutine
// (TestPipelinedEncoderSameBytes): equal inputs give equal bytes on any
// machine. The pipeline cut the default's compression of 48 MiB of
// /init, etcd and modules from 3.60 s to 3.03 s on two cores.
func (c Compression) writer(w io.Writer) (*zstd.Encoder, error) {
	opts := []zstd.EOption{zstd.WithEncoderConcurrency(encoderPipeline)}
	switch c {
	case CompressionFast:
		opts = append(opts, zstd.WithEncoderLevel(zstd.SpeedDefault))
	default:
		opts = append(opts, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(smallWindow))
	}
	return zstd.NewWriter(w, opts...)
}

// initrdCompressor compresses the initrd's members as a Config says.
type initrdCompressor struct {
	c Compression
	// prog is CompressionSmall's zstd program; nil: the built-in
	// encoder, for the reason why gives.
	prog  *zstdProgram
	why   string
	cache *memberCache // nil: none
}

func newInitrdCompressor(ctx context.Context, cfg Config) (*initrdCompressor, error) {
	ic := &initrdCompressor{c: cfg.Compression}
	if cfg.Compression != CompressionSmall {
		return ic, nil
	}
	prog, why, err := findZstd(ctx, cfg.Zstd)
	if err != nil {
		return nil, err
	}
	ic.prog, ic.why = prog, why
	if prog != nil && cfg.CacheDir != "" {
		ic.cache = &memberCache{dir: cfg.CacheDir}
	}
	return ic, nil
}

// name is InitrdInfo.Compressor; wide says a member had the wide window.
func (ic *initrdCompressor) name(wide bool) string {
	switch {
	case ic.c == CompressionFast:
		return "built-in zstd, default level (fast)"
	case ic.prog != nil && wide:
		return ic.prog.id(false) + " (/init and etcd: --long=25)"
	case ic.prog != nil:
		return ic.prog.id(false)
	}
	return "built-in zstd, best level, 32 MiB window (" + ic.why + ")"
}

// member writes p as one newc archive, its inodes numbered from first,
// compressed, to w, and returns the archive's size and whether its frame
// came from the cache. warn is a cache that could not be written: the
// build goes on without it.
func (ic *initrdCompressor) member(ctx context.Context, w io.Writer, p cpioPart, first uint32, epoch int64) (size int64, cached bool, warn, err error) {
	if ic.prog == nil {
		zw, err := ic.c.writer(w)
		if err != nil {
			return 0, false, nil, err
		}
		n, err := writeCPIOFrom(ctx, zw, p.nodes, first, epoch)
		if err != nil {
			zw.Close()
			return 0, false, nil, err
		}
		return n, false, nil, zw.Close()
	}
	var archive bytes.Buffer
	n, err := writeCPIOFrom(ctx, &archive, p.nodes, first, epoch)
	if err != nil {
		return 0, false, nil, err
	}
	var key string
	if p.keep && ic.cache != nil {
		key = ic.cache.key(ic.prog.id(p.wide), archive.Bytes())
		defer ic.cache.lock(key)()
		if frame, ok := ic.cache.get(key, archive.Bytes()); ok {
			_, err := w.Write(frame)
			return n, true, nil, err
		}
	}
	frame, err := ic.prog.compress(ctx, archive.Bytes(), p.wide)
	if err != nil {
		return 0, false, nil, err
	}
	if key != "" {
		warn = ic.cache.put(key, frame)
	}
	_, err = w.Write(frame)
	return n, false, warn, err
}
