package slot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEntryTextIsTheBuilders(t *testing.T) {
	assert.Equal(t, builderEntry, entryText("a", 1, builderOptions))
}

func TestParseEntry(t *testing.T) {
	tests := []struct {
		name    string
		slot    string
		text    string
		gen     int
		options string
		err     string
	}{
		{name: "builder", slot: "a", text: builderEntry, gen: 1, options: builderOptions},
		{name: "staged", slot: "b", text: entryText("b", 12, "panic=10 etcdbox.slot=b"), gen: 12, options: "panic=10 etcdbox.slot=b"},
		{name: "comments, tabs, two options lines", slot: "a",
			text: "# hand-edited\ntitle x\nversion\t7\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\ninitrd /etcdbox/a/initrd\noptions a=1\noptions  b=2\n",
			gen:  7, options: "a=1 b=2"},
		{name: "no version", slot: "a", text: strings.Replace(builderEntry, "version 1\n", "", 1), err: `version "": want a generation number`},
		{name: "version zero", slot: "a", text: strings.Replace(builderEntry, "version 1", "version 0", 1), err: "version \"0\""},
		{name: "version not a number", slot: "a", text: strings.Replace(builderEntry, "version 1", "version 1.2", 1), err: "version \"1.2\""},
		{name: "other sort-key", slot: "a", text: strings.Replace(builderEntry, "sort-key etcdbox", "sort-key debian", 1), gen: 1, err: "sort-key \"debian\""},
		{name: "kernel of the other slot", slot: "b", text: builderEntry, gen: 1, err: `linux "/etcdbox/a/vmlinuz": want "/etcdbox/b/vmlinuz"`},
		{name: "no initrd", slot: "a", text: strings.Replace(builderEntry, "initrd /etcdbox/a/initrd\n", "", 1), gen: 1, err: `initrd "": want`},
		{name: "two initrds", slot: "a", text: builderEntry + "initrd /x\n", err: "more than one initrd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen, options, err := parseEntry(tt.slot, []byte(tt.text))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.options, options)
			}
			assert.Equal(t, tt.gen, gen, "generation")
		})
	}
}

func TestWithSlot(t *testing.T) {
	tests := []struct {
		name, in, slot, want string
	}{
		{"replace", builderOptions, "b", "console=ttyS0,115200 panic=10 etcdbox.slot=b etcdbox.debug=1"},
		{"same", builderOptions, "a", builderOptions},
		{"append", "console=ttyS0 panic=10", "b", "console=ttyS0 panic=10 etcdbox.slot=b"},
		{"every one", "etcdbox.slot=a x etcdbox.slot=", "b", "etcdbox.slot=b x etcdbox.slot=b"},
		{"spaces", "  panic=10   quiet ", "a", "panic=10 quiet etcdbox.slot=a"},
		{"empty", "", "a", "etcdbox.slot=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, WithSlot(tt.in, tt.slot), "WithSlot(%q, %q)", tt.in, tt.slot)
		})
	}
}

func TestReadBuilderESP(t *testing.T) {
	fsys := Dir(t.TempDir())
	populate(t, fsys, builderESP())
	st, err := Read(fsys)
	require.NoError(t, err)
	a := st.Slots["a"]
	require.NotNil(t, a.Entry)
	assert.Equal(t, Entry{File: "etcdbox-a.conf", Name: Name{Slot: "a"}, Generation: 1, Options: builderOptions}, *a.Entry)
	assert.Equal(t, Blessed, a.Status())
	assert.True(t, a.Complete(), describe(st))
	assert.Equal(t, Slot{Name: "b"}, st.Slots["b"])
	assert.Equal(t, Absent, st.Slots["b"].Status())
	assert.Empty(t, st.Ignored)
	assert.Equal(t, "a", st.Next())
}

func TestReadIgnoresAndReports(t *testing.T) {
	fsys := Dir(t.TempDir())
	content := builderESP()
	for name, text := range map[string]string{
		"etcdbox-a+0-3.conf":   strings.Replace(builderEntry, "version 1", "version 5", 1),
		"etcdbox-c.conf":       "version 9\n",
		"etcdbox-b+x.conf":     "version 9\n",
		"debian.conf":          "title Debian\n",
		"etcdbox-b+3.conf.tmp": "title etc",
		"README":               "hi\n",
	} {
		content["loader/entries/"+name] = []byte(text)
	}
	populate(t, fsys, content)
	require.NoError(t, fsys.Mkdir("loader/entries/sub"))

	st, err := Read(fsys)
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, ig := range st.Ignored {
		reasons[ig.File] = ig.Reason
	}
	assert.Equal(t, map[string]string{
		"etcdbox-c.conf":       `unknown slot "c" (want a or b)`,
		"etcdbox-b+x.conf":     `malformed boot counter "+x" (want +LEFT or +LEFT-DONE): "x" is not a number`,
		"debian.conf":          "not an etcdbox entry",
		"etcdbox-b+3.conf.tmp": "temporary file of an interrupted write",
		"README":               "not a .conf file; systemd-boot does not read it",
	}, reasons)

	// Two entries for a: a rename cut short. The blessed one is the
	// slot's entry; the bad one is extra.
	a := st.Slots["a"]
	require.NotNil(t, a.Entry)
	assert.Equal(t, "etcdbox-a.conf", a.Entry.File)
	require.Len(t, a.Extra, 1)
	assert.Equal(t, "etcdbox-a+0-3.conf", a.Extra[0].File)
	assert.Equal(t, 5, a.Extra[0].Generation)
	assert.Equal(t, Absent, st.Slots["b"].Status())

	// Bless keeps the preferred entry and removes the extra one.
	require.NoError(t, Bless(fsys, "a"))
	st, err = Read(fsys)
	require.NoError(t, err)
	assert.Nil(t, st.Slots["a"].Extra)
	assert.Equal(t, "etcdbox-a.conf", st.Slots["a"].Entry.File)

	// Staging b clears b's namespace (the malformed and temporary
	// entries) and leaves foreign files alone.
	_, err = Stage(fsys, "b", Update{Kernel: strings.NewReader("k"), Initrd: strings.NewReader("i"), Options: builderOptions})
	require.NoError(t, err)
	st, err = Read(fsys)
	require.NoError(t, err)
	var left []string
	for _, ig := range st.Ignored {
		left = append(left, ig.File)
	}
	assert.ElementsMatch(t, []string{"etcdbox-c.conf", "debian.conf", "README"}, left)
	assert.Equal(t, "etcdbox-b+3.conf", st.Slots["b"].Entry.File)
}

func TestReadNoEntriesDir(t *testing.T) {
	_, err := Read(Dir(t.TempDir()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loader/entries")
}

func TestReadMalformedEntry(t *testing.T) {
	fsys := Dir(t.TempDir())
	content := builderESP()
	content["loader/entries/etcdbox-a.conf"] = []byte("title broken\n")
	populate(t, fsys, content)
	st, err := Read(fsys)
	require.NoError(t, err, "a malformed entry is reported, not fatal")
	a := st.Slots["a"]
	require.NotNil(t, a.Entry)
	assert.Error(t, a.Entry.Err)
	assert.False(t, a.Complete())
}

func TestNext(t *testing.T) {
	entry := func(file string, gen int) *Entry {
		n, err := ParseName(file)
		require.NoError(t, err)
		return &Entry{File: file, Name: n, Generation: gen}
	}
	tests := []struct {
		name string
		a, b *Entry
		want string
	}{
		{"none", nil, nil, ""},
		{"builder", entry("etcdbox-a.conf", 1), nil, "a"},
		{"staged b", entry("etcdbox-a.conf", 1), entry("etcdbox-b+3.conf", 2), "b"},
		{"trying b", entry("etcdbox-a.conf", 1), entry("etcdbox-b+1-2.conf", 2), "b"},
		{"bad b", entry("etcdbox-a.conf", 1), entry("etcdbox-b+0-3.conf", 2), "a"},
		{"blessed b over older a", entry("etcdbox-a.conf", 1), entry("etcdbox-b.conf", 2), "b"},
		{"new a over blessed b", entry("etcdbox-a+3.conf", 3), entry("etcdbox-b.conf", 2), "a"},
		{"all bad: highest", entry("etcdbox-a+0-3.conf", 3), entry("etcdbox-b+0-1.conf", 2), "a"},
		{"only bad", nil, entry("etcdbox-b+0-3.conf", 2), "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := State{Slots: map[string]Slot{"a": {Name: "a", Entry: tt.a}, "b": {Name: "b", Entry: tt.b}}}
			assert.Equal(t, tt.want, st.Next())
		})
	}
}

func TestBooted(t *testing.T) {
	st := func(afile, bfile string) State {
		s := State{Slots: map[string]Slot{"a": {Name: "a"}, "b": {Name: "b"}}}
		for slot, file := range map[string]string{"a": afile, "b": bfile} {
			if file == "" {
				continue
			}
			n, err := ParseName(file)
			require.NoError(t, err)
			s.Slots[slot] = Slot{Name: slot, Entry: &Entry{File: file, Name: n}}
		}
		return s
	}
	tests := []struct {
		name    string
		cmdline map[string]string
		st      State
		slot    string
		trying  bool
	}{
		{"builder", map[string]string{"etcdbox.slot": "a"}, st("etcdbox-a.conf", ""), "a", false},
		{"first try", map[string]string{"etcdbox.slot": "b"}, st("etcdbox-a.conf", "etcdbox-b+2-1.conf"), "b", true},
		{"not yet renamed", map[string]string{"etcdbox.slot": "b"}, st("etcdbox-a.conf", "etcdbox-b+3.conf"), "b", true},
		{"last try", map[string]string{"etcdbox.slot": "b"}, st("etcdbox-a.conf", "etcdbox-b+0-3.conf"), "b", true},
		{"fell back", map[string]string{"etcdbox.slot": "a"}, st("etcdbox-a.conf", "etcdbox-b+0-3.conf"), "a", false},
		{"blessed", map[string]string{"etcdbox.slot": "b"}, st("etcdbox-a.conf", "etcdbox-b.conf"), "b", false},
		{"no entry", map[string]string{"etcdbox.slot": "b"}, st("etcdbox-a.conf", ""), "b", false},
		{"no slot", map[string]string{"console": "ttyS0"}, st("etcdbox-a.conf", ""), "", false},
		{"bad slot", map[string]string{"etcdbox.slot": "c"}, st("etcdbox-a.conf", ""), "", false},
		{"nil cmdline", nil, State{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slot, trying := Booted(tt.cmdline, tt.st)
			assert.Equal(t, tt.slot, slot, "slot")
			assert.Equal(t, tt.trying, trying, "trying")
		})
	}
}
