package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// formingNode answers the formation calls of the node API.
type formingNode struct {
	statusNode
	f       nodeapi.Formation
	refuse  error
	without []string
}

func (n *formingNode) Formation(context.Context) (nodeapi.Formation, error) { return n.f, nil }
func (n *formingNode) FormWithout(_ context.Context, names []string) (nodeapi.Formation, error) {
	if n.refuse != nil {
		return nodeapi.Formation{}, n.refuse
	}
	n.without = names
	n.f.Without = names
	return n.f, nil
}

func TestBootstrapWithout(t *testing.T) {
	adminDir := t.TempDir()
	require.NoError(t, pki.Init(adminDir, false))
	n1 := &formingNode{f: nodeapi.Formation{Name: "n1", Cluster: "demo"}}
	n2 := &formingNode{f: nodeapi.Formation{Name: "n2", Cluster: "demo"}}
	p1, p2 := serveNode(t, adminDir, "n1", n1), serveNode(t, adminDir, "n2", n2)
	eps := "https://127.0.0.1:" + strconv.Itoa(p1) + ",https://127.0.0.1:" + strconv.Itoa(p2)

	var out bytes.Buffer
	err := run(t.Context(), []string{"bootstrap", "--without", "n3", "--endpoints", eps, "--pki", adminDir}, &out, &out)
	require.NoError(t, err, out.String())
	assert.Equal(t, []string{"n3"}, n1.without)
	assert.Equal(t, []string{"n3"}, n2.without)
	assert.Contains(t, out.String(), `n1: forms cluster "demo" without n3`)

	n2.refuse = fmt.Errorf("already started")
	out.Reset()
	err = run(t.Context(), []string{"bootstrap", "--without", "n3", "--endpoints", eps, "--pki", adminDir}, &out, &out)
	require.ErrorContains(t, err, "1 of 2 nodes refused or did not answer")
	assert.Contains(t, out.String(), "already started")

	err = run(t.Context(), []string{"bootstrap", "--endpoints", eps, "--pki", adminDir}, &out, &out)
	require.ErrorContains(t, err, "--without is required")
}
