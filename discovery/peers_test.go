package discovery

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStaticPeers(t *testing.T) {
	seed := []Peer{
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
	s := StaticPeers([]Peer{{Name: "n1", Host: "h1"}, {Name: "n2", Host: "h2"}, {Name: "n3", Host: "h3"}})
	tests := []struct {
		n    int
		want []string
	}{
		{-1, []string{}},
		{0, []string{}},
		{1, []string{"n1"}},
		{3, []string{"n1", "n2", "n3"}},
		{5, []string{"n1", "n2", "n3"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, s.Initial(tt.n).Names(), "Initial(%d)", tt.n)
	}
	init := s.Initial(2)
	init[0].Name = "changed"
	assert.Equal(t, "n1", s[0].Name, "Initial shares storage with its set")
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
