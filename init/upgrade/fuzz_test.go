package upgrade

import (
	"archive/tar"
	"bytes"
	"maps"
	"slices"
	"testing"
)

// FuzzScanLayer: any bytes as a layer's tar either scan or fail, never a
// panic, and no boot file is ever longer than its bound.
func FuzzScanLayer(f *testing.F) {
	f.Add(tarBytesFuzz(map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "a=1\n"}))
	f.Add(tarBytesFuzz(map[string]string{"./boot/../boot/vmlinuz": "k"}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Boot
		var found bootFound
		_ = scanLayer(bytes.NewReader(data), &b, &found)
		if len(b.Kernel) > maxBootFile || len(b.Initrd) > maxBootFile || len(b.Cmdline) > maxCmdline {
			t.Fatalf("a boot file past its bound: kernel %d, initrd %d, cmdline %d", len(b.Kernel), len(b.Initrd), len(b.Cmdline))
		}
	})
}

// tarBytesFuzz is tarBytes for a fuzz target's seed corpus.
func tarBytesFuzz(files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		_ = tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(files[p]))
	}
	_ = tw.Close()
	return buf.Bytes()
}
