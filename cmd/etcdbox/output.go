package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// The -o json and -o yaml forms. Their fields are the stable interface of
// the machine-readable output (README "Machine-readable output"): fields
// are only ever added. YAML is the JSON document converted, so both have
// the same field names and shape.

// outputFormats are the values of -o, the first the default.
var outputFormats = []string{"table", "json", "yaml"}

// addOutputFlag registers -o/--output on cmd into p, default table; what
// names the output it shapes (for the help text).
func addOutputFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVarP(p, "output", "o", outputFormats[0], what+": "+strings.Join(outputFormats, ", "))
}

// checkOutput is the usage error for an -o value that is not a format.
func checkOutput(format string) error {
	if slices.Contains(outputFormats, format) {
		return nil
	}
	return usageError{fmt.Errorf("-o %q: want one of %s", format, strings.Join(outputFormats, ", "))}
}

// emit writes v as format's document: indented JSON, or the same document
// as YAML; both end in a newline. The table format is each command's own.
func emit(out io.Writer, format string, v any) error {
	switch format {
	case "json":
		return writeJSON(out, v)
	case "yaml":
		var b bytes.Buffer
		if err := writeJSON(&b, v); err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b.Bytes())
		if err != nil {
			return err
		}
		_, err = out.Write(y)
		return err
	}
	if err := checkOutput(format); err != nil {
		return err
	}
	return fmt.Errorf("-o %s is printed by the command, not emit", format)
}

// writeJSON writes v indented, with a final newline.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// rollJSON is upgrade --status -o json.
type rollJSON struct {
	// Target is the roll's goal, null when no roll is recorded.
	Target *rollout.Target `json:"target"`
	// Nodes are the nodes' records, in name order.
	Nodes []rollout.NodeRecord `json:"nodes"`
}

func rollStatusJSON(s rollout.Status) rollJSON {
	r := rollJSON{Target: s.Target, Nodes: s.Records}
	if r.Nodes == nil {
		r.Nodes = []rollout.NodeRecord{}
	}
	return r
}

// clusterNodeJSON is one node of cluster status -o json.
type clusterNodeJSON struct {
	Name string `json:"name"`
	// VM is running, stopped, paused or partitioned.
	VM string `json:"vm"`
	// MemberID is the etcd member ID in hex, empty when etcd did not
	// answer; Role is voter, learner or empty then.
	MemberID string `json:"memberID,omitempty"`
	Role     string `json:"role,omitempty"`
	Leader   bool   `json:"leader"`
	// Health is "healthy", or what went wrong.
	Health string `json:"health"`
	// Slot is the booted slot, empty when unknown.
	Slot string `json:"slot,omitempty"`
	// Address is the node's address; NextAddress the one its next DHCP
	// lease gives, after cluster renumber.
	Address     string `json:"address"`
	NextAddress string `json:"nextAddress,omitempty"`
	// DiskLimit is the limit cluster limit-disk set on its disk, absent
	// for none.
	DiskLimit *qemu.DiskLimit `json:"diskLimit,omitempty"`
	// Links says how cluster impair degraded its links, absent when it
	// did not.
	Links string `json:"links,omitempty"`
	// Endpoint is etcd's client URL as this host reaches it.
	Endpoint string `json:"endpoint"`
}

func clusterStatusJSON(rows []cluster.NodeStatus) []clusterNodeJSON {
	out := []clusterNodeJSON{}
	for _, r := range rows {
		n := clusterNodeJSON{Name: r.Node.Name, VM: r.State, Leader: r.Leader, Health: r.Health, Address: r.Node.IP.String(), Endpoint: r.Node.Endpoint()}
		if r.MemberID != 0 {
			n.MemberID, n.Role = fmt.Sprintf("%016x", r.MemberID), r.Role()
		}
		if r.Slot != "-" {
			n.Slot = r.Slot
		}
		if r.Node.NextIP.IsValid() {
			n.NextAddress = r.Node.NextIP.String()
		}
		if !r.Disk.Zero() {
			n.DiskLimit = &r.Disk
		}
		n.Links = r.Links
		out = append(out, n)
	}
	return out
}
