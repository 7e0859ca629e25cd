package kmod

// fnmatch reports whether s matches the shell pattern p with fnmatch(3)
// semantics and no flags, which is what kmod uses for module aliases:
// '*' matches any run of bytes (including '/', unlike path.Match), '?' one
// byte, "[...]" a set with ranges and '!' or '^' negation, and '\' quotes
// the next byte. A malformed bracket matches itself literally, as in glibc.
//
// Only '*' is variable length, so backtracking to the last '*' is enough:
// O(len(p)*len(s)) worst case, linear for typical aliases.
func fnmatch(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if ok, n, valid := matchBracket(p[pi:], s[si]); valid {
					if ok {
						pi += n
						si++
						continue
					}
					break // mismatch: backtrack below
				}
				if s[si] == '[' { // unterminated: a literal '['
					pi++
					si++
					continue
				}
			case '\\':
				if pi+1 < len(p) && p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
				if pi+1 == len(p) && s[si] == '\\' { // trailing '\' is literal
					pi++
					si++
					continue
				}
			default:
				if c == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last '*' swallow one more byte and retry.
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchBracket matches c against the bracket expression at the start of p
// ("[a-c]", "[!0-9]"). It returns whether c is in the set, the length of
// the expression, and whether p holds a complete expression at all.
func matchBracket(p string, c byte) (ok bool, n int, valid bool) {
	i := 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(p) {
		lo := p[i]
		if lo == ']' && !first {
			return ok != negate, i + 1, true
		}
		first = false
		if lo == '\\' && i+1 < len(p) {
			i++
			lo = p[i]
		}
		hi := lo
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi = p[i+2]
			if hi == '\\' && i+3 < len(p) {
				i++
				hi = p[i+2]
			}
			i += 2
		}
		if lo <= c && c <= hi {
			ok = true
		}
		i++
	}
	return false, 0, false
}
