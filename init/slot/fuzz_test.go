package slot

import "testing"

// FuzzName: an entry file name either parses or is rejected with a
// reason, never a panic; a parsed name prints back to a name that parses
// to the same value, case aside (FAT ignores case).
func FuzzName(f *testing.F) {
	for _, s := range []string{"etcdbox-a.conf", "etcdbox-b+3.conf", "etcdbox-b+0-3.conf", "ETCDBOX-A+1-2.CONF", "etcdbox-a.conf.tmp", "etcdbox-c+x.conf", "other.conf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		n, err := ParseName(file)
		if err != nil {
			return
		}
		back, err := ParseName(n.String())
		if err != nil {
			t.Fatalf("%q parsed to %+v, whose name %q does not parse: %v", file, n, n.String(), err)
		}
		if back != n {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v", file, n, n.String(), back)
		}
	})
}

// FuzzEntry: an entry's content either parses or is rejected, never a
// panic, and a parsed generation is positive.
func FuzzEntry(f *testing.F) {
	f.Add("title etcdbox a\nversion 1\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\ninitrd /etcdbox/a/initrd\noptions console=ttyS0 panic=10 etcdbox.slot=a\n")
	f.Add("version 0\n")
	f.Add("# comment\nversion 99999999999999999999\n")
	f.Fuzz(func(t *testing.T, data string) {
		for _, s := range []string{"a", "b"} {
			gen, _, err := parseEntry(s, []byte(data))
			if err == nil && gen <= 0 {
				t.Fatalf("generation %d accepted", gen)
			}
		}
	})
}
