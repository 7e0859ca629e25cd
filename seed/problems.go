package seed

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-multierror"

	"github.com/etcdbox/etcdbox/pki"
)

// problems collects every problem of a seed, each at its key path.
type problems struct {
	errs *multierror.Error
}

// add records a problem at path. The seed's own values are quoted (%q),
// and those are shortened (see shortened): an error names the key path
// and the kind of problem, and never echoes a secret or a megabyte of
// input. Other string arguments are the messages' own words.
func (p *problems) add(path, format string, args ...any) {
	// A path holds the seed's own keys, and an unknown key is input too
	// (a fuzz find: a key named "-----BEGIN" was repeated whole).
	path = shortened(path)
	for i, verb := range verbs(format) {
		if i >= len(args) {
			break
		}
		if s, ok := args[i].(string); ok && verb == 'q' {
			args[i] = shortened(s)
		}
	}
	p.errs = multierror.Append(p.errs, &FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// quotedRE matches a double-quoted string with backslash escapes.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// shortenQuoted applies shortened to every quoted string in msg, a
// library's error that may quote the seed, and cuts an unquoted PEM tail.
func shortenQuoted(msg string) string {
	msg = quotedRE.ReplaceAllStringFunc(msg, func(q string) string {
		return strconv.Quote(shortened(q[1 : len(q)-1]))
	})
	if i := strings.Index(msg, "-----BEGIN"); i >= 0 {
		msg = msg[:i] + "<PEM text, not shown>"
	}
	return msg
}

// verbs lists the verbs of format's arguments in order ("%q: %s" gives
// q, s); %% takes none.
func verbs(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
			i++
		}
		if i < len(format) && format[i] != '%' {
			out = append(out, format[i])
		}
	}
	return out
}

// maxShown bounds how much of a bad value a seed error repeats.
const maxShown = 48

// shortened is s as an error may repeat it: PEM text (a key, perhaps, in
// the wrong place) is never shown, only its size, and a long value is cut
// to its first maxShown bytes with its size.
func shortened(s string) string {
	switch {
	case strings.Contains(s, "-----BEGIN") || strings.Contains(s, "PRIVATE KEY"):
		return fmt.Sprintf("<PEM text of %d bytes, not shown>", len(s))
	case len(s) > maxShown:
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
	}
	return s
}

// err returns the problems on one line each joined by "; ", which reads well
// on a serial console after "etcdbox: seed error: ".
func (p *problems) err() error {
	if p.errs == nil {
		return nil
	}
	p.errs.ErrorFormat = func(errs []error) string {
		s := make([]string, len(errs))
		for i, e := range errs {
			s[i] = e.Error()
		}
		return strings.Join(s, "; ")
	}
	return p.errs
}

// paths returns the key paths of the problems found so far.
func (p *problems) paths() []string {
	if p.errs == nil {
		return nil
	}
	var out []string
	for _, e := range p.errs.Errors {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe.Path)
		}
	}
	return out
}

// covered reports whether path is one of reported or lies below one.
func covered(path string, reported []string) bool {
	for _, r := range reported {
		if rest, ok := strings.CutPrefix(path, r); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// cert parses optional PEM text at path, reporting a problem if it is bad.
func (p *problems) cert(path, text string) *x509.Certificate {
	if text == "" {
		return nil
	}
	c, err := pki.ParseCertPEM([]byte(text))
	if err != nil {
		p.add(path, "%v", err)
		return nil
	}
	return c
}

// key parses an optional PEM private key at path, reporting a problem if it
// is bad.
func (p *problems) key(path, text string) crypto.Signer {
	if text == "" {
		return nil
	}
	k, err := pki.ParseKeyPEM([]byte(text))
	if err != nil {
		p.add(path, "%v", err)
		return nil
	}
	return k
}

// checkShape compares the generic JSON tree v with the Go type t and reports
// unknown keys and wrongly typed values at their key paths. encoding/json
// would stop at the first of them, match keys case-insensitively, and name
// neither list indexes nor every problem.
func (p *problems) checkShape(path string, v any, t reflect.Type) {
	if v == nil {
		return // null: the zero value
	}
	at := path
	if at == "" {
		at = "seed"
	}
	switch t.Kind() {
	case reflect.Pointer:
		p.checkShape(path, v, t.Elem())
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			p.add(at, "want a mapping, got %s", describe(v))
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kp := k
			if path != "" {
				kp = path + "." + k
			}
			f, ok := fields[k]
			if !ok {
				p.add(kp, "unknown key%s", suggest(k, fields))
				continue
			}
			p.checkShape(kp, m[k], f.Type)
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			p.add(at, "want a list, got %s", describe(v))
			return
		}
		for i, e := range l {
			p.checkShape(fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.add(at, "want a string, got %s", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.add(at, "want true or false, got %s", describe(v))
		}
	case reflect.Int, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			p.add(at, "want an integer, got %s", describe(v))
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			p.add(at, "want an integer, got %s", describe(v))
		}
	default:
		panic(fmt.Sprintf("discovery: seed field %s has unsupported type %s", at, t))
	}
}

// jsonFields maps the json names of t's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	return m
}

// suggest names the known key nearest to k: one that differs only in
// case, else one within a small edit distance (1 for keys of up to four
// letters, 2 for longer ones; a swap of two neighbours counts once), the
// nearest first and then by name.
func suggest(k string, fields map[string]reflect.StructField) string {
	best, bestD := "", 3
	for name := range fields {
		if strings.EqualFold(name, k) {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
		limit := 2
		if len(name) <= 4 {
			limit = 1
		}
		if d := editDistance(strings.ToLower(k), strings.ToLower(name)); d <= limit && (d < bestD || d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of neighbours, each 1.
// Seed keys are short; a key over 64 bytes is too far from any.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", shortened(v))
	case json.Number:
		return "number " + v.String()
	case bool:
		return fmt.Sprintf("boolean %t", v)
	default:
		return fmt.Sprintf("%T", v)
	}
}
