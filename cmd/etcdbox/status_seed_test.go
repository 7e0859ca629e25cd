package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// TestSeedNote: status says where each node's seed came from, nodes
// grouped by source in the order they first appear, and leaves out a node
// that did not answer or did not say.
func TestSeedNote(t *testing.T) {
	r := func(name, endpoint, src string, err error) statusResult {
		return statusResult{target: statusTarget{name: name, endpoint: endpoint}, status: nodeapi.Status{Name: "from-api-" + name, SeedSource: src}, err: err}
	}
	got := seedNote([]statusResult{
		r("n1", "https://a", "ec2", nil),
		r("n2", "https://b", "nocloud", nil),
		r("n3", "https://c", "ec2", nil),
		r("n4", "https://d", "gce", errors.New("refused")),
		r("n5", "https://e", "", nil),
		// Asked by endpoint: the node's own name is shown.
		r("https://f", "https://f", "azure", nil),
	})
	assert.Equal(t, "seeds: n1, n3 from ec2; n2 from nocloud; from-api-https://f from azure", got)
	assert.Empty(t, seedNote([]statusResult{r("n1", "https://a", "", nil)}), "no node said")
}
