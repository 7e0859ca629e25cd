package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newDecommissionCmd) }

func newDecommissionCmd() *cobra.Command {
	var (
		endpoints []string
		dir       string
		tf        tlsFlags
		reason    string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "decommission NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Retire NODE for good: it removes its own member and powers off",
		Long: `Decommission asks NODE's API to leave the cluster: the node hands
leadership over if it leads, removes its own member (under the membership
lock, and only while the voters that remain keep a healthy quorum, as
members remove checks), writes a tombstone in its state/ with the reason
and time, and powers off. The command returns once the member is removed.

A decommissioned node never rejoins by itself: booted again, it waits and
says why. Wipe its DATA to bring it back as a new member.

--dir finds NODE in a local cluster's DIR/state.json; --endpoints names
node APIs (https://host:port, default port 9379) and the one whose status
names NODE is asked (each within --timeout, at most 10s). --timeout
bounds the node's answer to the decommission.`,
		Example: `  etcdbox decommission n5 --dir run/ --reason "scale 5 -> 3"
  etcdbox decommission n5 --endpoints 10.0.0.15 --pki pki/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			targets, files, err := nodeTargets(dir, tf, endpoints)
			if err != nil {
				return err
			}
			endpoint, err := findNode(cmd.Context(), node, targets, files, dir != "", min(timeout, 10*time.Second))
			if err != nil {
				return err
			}
			if reason == "" {
				reason = "etcdbox decommission by " + rollBy()
			}
			c, err := nodeapi.NewClientFiles(endpoint, files)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			d, err := c.Decommission(ctx, node, reason)
			if err = withinTimeout(ctx, err, timeout); err != nil {
				return fmt.Errorf("decommission %s: %w", node, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: member %s removed at %s; tombstone %s; the node powers off\n",
				d.Node, d.MemberID, d.At.UTC().Format(time.RFC3339), d.Tombstone)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port)")
	f.StringVar(&dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	tf.add(cmd)
	f.StringVar(&reason, "reason", "", "why, recorded in the node's tombstone (default: who ran the command)")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the node's answer")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	return cmd
}

// findNode returns the node API endpoint of the node called name: by its
// name in state.json (byName), else by asking each endpoint's status.
func findNode(ctx context.Context, name string, targets []statusTarget, files nodeapi.TLSFiles, byName bool, timeout time.Duration) (string, error) {
	var names []string
	if byName {
		for _, t := range targets {
			if t.name == name {
				if t.err != nil {
					return "", fmt.Errorf("node %s: %w", name, t.err)
				}
				return t.endpoint, nil
			}
			names = append(names, t.name)
		}
		return "", fmt.Errorf("no node %s in the cluster; its nodes are %s", name, strings.Join(names, ", "))
	}
	var problems []string
	for _, r := range queryStatus(ctx, targets, files, timeout) {
		switch {
		case r.err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", r.target.endpoint, r.err))
		case r.status.Name == name:
			return r.target.endpoint, nil
		default:
			names = append(names, r.status.Name+" at "+r.target.endpoint)
		}
	}
	slices.Sort(names)
	msg := fmt.Sprintf("no endpoint answers as node %s", name)
	if len(names) > 0 {
		msg += "; they are " + strings.Join(names, ", ")
	}
	if len(problems) > 0 {
		msg += "; no answer from " + strings.Join(problems, "; ")
	}
	return "", errors.New(msg)
}
