package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newBootstrapCmd) }

// bootstrapResult is one node's answer to bootstrap --without.
type bootstrapResult struct {
	target    statusTarget
	formation nodeapi.Formation
	err       error
}

func newBootstrapCmd() *cobra.Command {
	var (
		endpoints []string
		dir       string
		tf        tlsFlags
		without   []string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bootstrap --without NAME[,NAME...] (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Form a new cluster without expected initial members that never boot",
		Long: `A new cluster forms only when every expected initial member answers that
it never formed it (DESIGN §5), so a member that never boots holds up the
first formation. This tells the other members, through their node APIs
(admin certificate), to form without the named members; those join later
as learners. Tell every member that should form: each waits until all of
them agree on the members left out.

A node that has already started its formation refuses. Nothing else
changes: the command is never needed, and never run, for a cluster that
formed.`,
		Example: `  etcdbox bootstrap --without n3 --dir run/
  etcdbox bootstrap --without n3 --endpoints https://10.0.0.11:9379,https://10.0.0.12:9379 --pki pki/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(without) == 0 {
				return errors.New("--without is required: the expected initial members to form without")
			}
			targets, files, err := nodeTargets(dir, tf, endpoints)
			if err != nil {
				return err
			}
			// With --dir, the left-out nodes are not asked: they may not run.
			targets = dropTargets(targets, without)
			results := formWithout(cmd.Context(), targets, files, without, timeout)
			return printBootstrap(cmd.OutOrStdout(), results, without)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&without, "without", nil, "expected initial members to form the cluster without, comma-separated")
	f.StringSliceVar(&endpoints, "endpoints", nil, "node API endpoints of the members that form, comma-separated (https://host:port)")
	f.StringVar(&dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	tf.add(cmd)
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for each node")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	return cmd
}

// dropTargets removes the targets named in names.
func dropTargets(targets []statusTarget, names []string) []statusTarget {
	var out []statusTarget
	for _, t := range targets {
		left := false
		for _, n := range names {
			left = left || t.name == n
		}
		if !left {
			out = append(out, t)
		}
	}
	return out
}

// formWithout asks every target at once, each within timeout.
func formWithout(ctx context.Context, targets []statusTarget, files nodeapi.TLSFiles, without []string, timeout time.Duration) []bootstrapResult {
	results := make([]bootstrapResult, len(targets))
	errs := askEach(ctx, targets, files, timeout, func(ctx context.Context, i int, c *nodeapi.Client) (err error) {
		results[i].formation, err = c.FormWithout(ctx, without)
		return err
	})
	for i, t := range targets {
		results[i].target, results[i].err = t, errs[i]
	}
	return results
}

// printBootstrap writes one line per node and fails when any refused.
func printBootstrap(out io.Writer, results []bootstrapResult, without []string) error {
	var failed []string
	for _, r := range results {
		name := r.target.name
		if r.err != nil {
			fmt.Fprintf(out, "%s: %v\n", name, r.err)
			failed = append(failed, name)
			continue
		}
		if r.formation.Name != "" {
			name = r.formation.Name
		}
		fmt.Fprintf(out, "%s: forms cluster %q without %s\n", name, r.formation.Cluster, strings.Join(r.formation.Without, ", "))
	}
	if len(results) == 0 {
		return fmt.Errorf("no node to tell: every target is one of %s", strings.Join(without, ", "))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d nodes refused or did not answer: %s", len(failed), len(results), strings.Join(failed, ", "))
	}
	return nil
}
