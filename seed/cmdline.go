package seed

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// CmdlineKey is the kernel command line parameter that carries a seed:
// base64 of the YAML, or of the YAML gzipped.
//
// An x86-64 kernel keeps 2047 bytes of command line and cuts the rest off
// (image.MaxCmdline). A seed with a node CA (its certificate, its key and
// the root's certificate) is about 1.9 KB of YAML, 2.5 KB as base64: too
// long. Gzipped, the PEM's base64 text shrinks to about 1.2 KB, 1.6 KB as
// base64, which fits. Cmdline gzips; FromCmdline takes either form.
const CmdlineKey = "etcdbox.seed"

// Cmdline returns the etcdbox.seed= argument that carries seed: gzipped
// at the best compression, then base64 (standard alphabet, unpadded, so
// no '=' but the key's).
func Cmdline(seed []byte) (string, error) {
	var b bytes.Buffer
	z, err := gzip.NewWriterLevel(&b, flate.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := z.Write(seed); err != nil {
		return "", err
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	return CmdlineKey + "=" + base64.RawStdEncoding.EncodeToString(b.Bytes()), nil
}

// ParseCmdline splits a kernel command line (the content of /proc/cmdline)
// into parameters the way the kernel's next_arg does: whitespace separates
// parameters except inside double quotes, and the quotes are dropped, so
// `a="x y"` and `"a=x y"` both give a = "x y". A parameter without '=' maps
// to "". When a key repeats, the last value wins. The "--" separator, after
// which the kernel passes arguments to init, is skipped; parameters after it
// are read like the others.
func ParseCmdline(s string) map[string]string {
	m := map[string]string{}
	var cur strings.Builder
	inQuote, inParam := false, false
	flush := func() {
		if !inParam {
			return
		}
		p := cur.String()
		cur.Reset()
		inParam = false
		if p == "--" {
			return
		}
		k, v, _ := strings.Cut(p, "=")
		if k != "" {
			m[k] = v
		}
	}
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inParam = true
		case !inQuote && isSpace(r):
			flush()
		default:
			cur.WriteRune(r)
			inParam = true
		}
	}
	flush()
	return m
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// FromCmdline returns the seed carried by etcdbox.seed= on the kernel
// command line s, decoded from base64: standard or URL alphabet, padded or
// not; then gunzipped when it is gzip (YAML never starts with gzip's
// magic bytes), to no more than MaxSize. ok is false when the parameter
// is absent. Errors name the parameter. The returned bytes still need
// Parse.
func FromCmdline(s string) (seed []byte, ok bool, err error) {
	v, ok := ParseCmdline(s)[CmdlineKey]
	if !ok {
		return nil, false, nil
	}
	seed, err = decodeBase64(v)
	if err == nil {
		seed, err = gunzipSeed(seed)
	}
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", CmdlineKey, err)
	}
	return seed, true, nil
}

// gunzipSeed returns b gunzipped when it starts with gzip's magic bytes,
// else b as it is. What gunzips to more than MaxSize is refused before
// more is read: a small argument must not expand without bound.
func gunzipSeed(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		return b, nil
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer z.Close()
	out, err := io.ReadAll(io.LimitReader(z, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := checkSize(len(out)); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("gzip: empty seed")
	}
	return out, nil
}

func decodeBase64(v string) ([]byte, error) {
	if v == "" {
		return nil, errors.New("empty value")
	}
	if strings.Contains(v, "://") {
		// DESIGN §4 plans seed URLs; until they exist, say so plainly
		// rather than report bad base64.
		return nil, fmt.Errorf("seed URLs are not supported yet: %q", v)
	}
	raw := strings.TrimRight(v, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(raw, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %w", err)
	}
	if len(b) == 0 {
		return nil, errors.New("empty value")
	}
	return b, nil
}

// WithoutSeed returns the kernel command line s without its etcdbox.seed=
// arguments (quoted or not), the rest separated by single spaces. A seed
// can carry the CA key, so a command line is never logged or copied into
// a new boot entry with it: a node that booted from a command-line seed
// finds the seed in its cache afterwards.
func WithoutSeed(s string) string {
	fields := strings.Fields(s)
	out := fields[:0]
	for _, f := range fields {
		if strings.HasPrefix(strings.TrimPrefix(f, `"`), CmdlineKey+"=") {
			continue
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}
