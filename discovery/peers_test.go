package discovery

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

func TestStaticPeers(t *testing.T) {
	seed := []seed.Peer{
		{Name: "b", Host: "10.0.0.2", PeerPort: 2480, ClientPort: 2479},
		{Name: "a", Host: "a.example.internal."},
		{Name: "c", Host: "fd00::3"},
	}
	s := StaticPeers(seed)
	// The seed's order is kept: it decides the expected initial members.
	assert.Equal(t, []string{"b", "a", "c"}, s.Names())
	assert.Equal(t, "https://10.0.0.2:2480", s[0].PeerURL())
	assert.Equal(t, "https://10.0.0.2:2479", s[0].ClientURL())
	assert.Equal(t, "https://a.example.internal:2380", s[1].PeerURL())
	assert.Equal(t, "https://a.example.internal:2379", s[1].ClientURL())
	assert.Equal(t, "https://[fd00::3]:2380", s[2].PeerURL())
	assert.Equal(t, "b=https://10.0.0.2:2480,a=https://a.example.internal:2380,c=https://[fd00::3]:2380", s.InitialCluster())
	assert.Equal(t, "a.example.internal.", seed[1].Host, "StaticPeers changed its input")

	assert.True(t, s.Contains("a"))
	assert.False(t, s.Contains("d"))
	p, ok := s.Get("c")
	assert.True(t, ok)
	assert.Equal(t, "fd00::3", p.Host)
	assert.Equal(t, []string{"https://10.0.0.2:2479", "https://[fd00::3]:2379"}, s.ClientURLs("a"))
	assert.Len(t, s.ClientURLs(""), 3)
}

func TestInitial(t *testing.T) {
	s := StaticPeers([]seed.Peer{{Name: "n1", Host: "h1"}, {Name: "n2", Host: "h2"}, {Name: "n3", Host: "h3"}})
	tests := []struct {
		name string
		set  PeerSet
		n    int
		want []string // nil: an error
		err  string
		// missing is IncompleteError.Missing.
		missing []string
	}{
		{name: "one of three", set: s, n: 1, want: []string{"n1"}},
		{name: "all", set: s, n: 3, want: []string{"n1", "n2", "n3"}},
		{name: "more listed than initial", set: s, n: 2, want: []string{"n1", "n2"}},
		{name: "negative", set: s, n: -1, err: "initial size -1: want at least 1"},
		{name: "zero", set: s, n: 0, err: "initial size 0: want at least 1"},
		{name: "two missing, numbered", set: s[:1], n: 3, err: "2 of 3 expected initial members missing (listed: n1); by their numbering the missing are n2, n3", missing: []string{"n2", "n3"}},
		{name: "first missing", set: s[1:], n: 3, err: "1 of 3 expected initial members missing (listed: n2, n3); by their numbering the missing are n1", missing: []string{"n1"}},
		{name: "more wanted than listed", set: s, n: 5, err: "2 of 5 expected initial members missing (listed: n1, n2, n3); by their numbering the missing are n4, n5", missing: []string{"n4", "n5"}},
		{name: "none listed", set: PeerSet{}, n: 3, err: "3 of 3 expected initial members missing (listed: none)"},
		{
			name: "names without numbers",
			set:  StaticPeers([]seed.Peer{{Name: "alpha", Host: "a"}}), n: 3,
			err: "2 of 3 expected initial members missing (listed: alpha)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.set.Initial(tt.n)
			if tt.want == nil {
				require.Error(t, err, "Initial(%d) = %v, want an error", tt.n, got.Names())
				assert.Nil(t, got)
				assert.Equal(t, tt.err, err.Error())
				var ie *IncompleteError
				if errors.As(err, &ie) {
					assert.Equal(t, tt.n, ie.Want)
					assert.Equal(t, tt.set.Names(), ie.Listed)
					assert.Equal(t, tt.missing, ie.Missing)
				} else {
					assert.Nil(t, tt.missing, "want an *IncompleteError")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Names(), "Initial(%d)", tt.n)
		})
	}
	init, err := s.Initial(2)
	require.NoError(t, err)
	init[0].Name = "changed"
	assert.Equal(t, "n1", s[0].Name, "Initial shares storage with its set")
}

func TestNumberedMissing(t *testing.T) {
	tests := []struct {
		name   string
		listed []string
		n      int
		want   []string
	}{
		{"numbered from 1", []string{"n1"}, 3, []string{"n2", "n3"}},
		{"gap", []string{"n1", "n3"}, 3, []string{"n2"}},
		{"numbered from 0", []string{"etcd0"}, 3, []string{"etcd1", "etcd2"}},
		{"dashed", []string{"node-2"}, 2, []string{"node-1"}},
		{"padded", []string{"node01", "node03"}, 3, []string{"node02"}},
		{"padded, ten or more", []string{"n01"}, 11, []string{"n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10", "n11"}},
		{"unpadded past nine", []string{"n9"}, 10, []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n10"}},
		{"number beyond the initial size", []string{"n1", "n5"}, 3, nil},
		{"two prefixes", []string{"a1", "b2"}, 3, nil},
		{"no number", []string{"n1", "alpha"}, 3, nil},
		{"same number twice", []string{"n1", "n01"}, 3, nil},
		{"mixed padding", []string{"n01", "n2"}, 3, nil},
		{"complete", []string{"n1", "n2"}, 2, nil},
		{"nothing listed", nil, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, numberedMissing(tt.listed, tt.n), "numberedMissing(%q, %d)", tt.listed, tt.n)
		})
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"n1", "n2", true},
		{"n2", "n10", true},
		{"n10", "n2", false},
		{"node-9", "node-10", true},
		{"a", "b", true},
		{"n", "n1", true},
		{"n1", "n1", false},
		{"n01", "n2", true},
		{"n1a", "n1b", true},
		{"9", "10", true},
		{"n10x", "n9y", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, naturalLess(tt.a, tt.b), "naturalLess(%q, %q)", tt.a, tt.b)
	}
}
