package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

func init() { commands = append(commands, newMembersCmd) }

// etcdFlags say how to reach etcd: the nodes' hosts (--endpoints, as
// upgrade takes them), etcd's own URLs, or a local cluster's directory.
type etcdFlags struct {
	endpoints     []string
	etcdEndpoints []string
	dir           string
	tls           tlsFlags
	timeout       time.Duration // bounds the whole verb: connecting and every request
}

func addEtcdFlags(cmd *cobra.Command, f *etcdFlags) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "endpoints", nil, "node API endpoints, comma-separated (etcd is reached on their hosts at port 2379)")
	fl.StringSliceVar(&f.etcdEndpoints, "etcd-endpoints", nil, "etcd client URLs, comma-separated (instead of --endpoints' hosts)")
	fl.StringVar(&f.dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	f.tls.add(cmd)
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long the command may take: connecting to etcd and every request")
	cmd.MarkFlagsOneRequired("endpoints", "etcd-endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("etcd-endpoints", "dir")
}

// etcdTargets returns etcd's client URLs as this host reaches them and
// the files of the admin certificate.
func etcdTargets(f etcdFlags) ([]string, nodeapi.TLSFiles, error) {
	var eps []string
	switch {
	case f.dir != "":
		st, err := cluster.ReadState(f.dir)
		if err != nil {
			if errors.Is(err, cluster.ErrNoCluster) {
				return nil, nodeapi.TLSFiles{}, fmt.Errorf("%w; use --endpoints for nodes that etcdbox cluster did not start", err)
			}
			return nil, nodeapi.TLSFiles{}, err
		}
		if len(st.Nodes) == 0 {
			return nil, nodeapi.TLSFiles{}, fmt.Errorf("%s lists no nodes", filepath.Join(f.dir, cluster.StateFile))
		}
		for _, n := range st.Nodes {
			eps = append(eps, n.Endpoint())
		}
	case len(f.etcdEndpoints) > 0:
		for _, e := range f.etcdEndpoints {
			u, err := url.Parse(e)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				return nil, nodeapi.TLSFiles{}, fmt.Errorf("etcd endpoint %q: want https://host:port", e)
			}
			eps = append(eps, e)
		}
	default:
		for _, e := range f.endpoints {
			u, err := nodeapi.ParseEndpoint(e)
			if err != nil {
				return nil, nodeapi.TLSFiles{}, err
			}
			pu, _ := url.Parse(u)
			eps = append(eps, "https://"+net.JoinHostPort(pu.Hostname(), "2379"))
		}
	}
	files, _, err := f.tls.resolve(f.dir)
	return eps, files, err
}

// dialEtcd connects to the cluster the flags name, with the admin
// certificate, once an endpoint answers within ctx (probeEtcd).
func dialEtcd(ctx context.Context, f etcdFlags) (*clientv3.Client, rollout.Removal, error) {
	eps, files, err := etcdTargets(f)
	if err != nil {
		return nil, rollout.Removal{}, err
	}
	tc, err := files.Config()
	if err != nil {
		return nil, rollout.Removal{}, err
	}
	if err := probeEtcd(ctx, eps, tc); err != nil {
		return nil, rollout.Removal{}, withinTimeout(ctx, err, f.timeout)
	}
	cli, err := rollout.Dial(eps, tc)
	if err != nil {
		return nil, rollout.Removal{}, fmt.Errorf("connect to etcd: %w", err)
	}
	return cli, rollout.Removal{Client: cli, TLS: tc, Endpoints: eps}, nil
}

func newMembersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members, or remove one",
		Long: `Members lists the etcd members with their health, and removes one.

A removal is one membership change: it takes the etcd lock
/etcdbox/membership that joining nodes take too, so it never overlaps a
join. It is refused when the node is not a member, when it is the last
member, when another change holds the lock, or when the voters that
remain would not have a healthy quorum. To retire a node that runs, use
etcdbox decommission: the node removes itself and powers off for good.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newMembersListCmd(), newMembersRemoveCmd())
	return cmd
}

func newMembersListCmd() *cobra.Command {
	var (
		f      etcdFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list (--endpoints URL[,URL...] --pki DIR | --etcd-endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "List the members: ID, name, URLs, voter or learner, started, health, leader",
		Example: `  etcdbox members list --dir run/
  etcdbox members list --endpoints 10.0.0.11,10.0.0.12 --pki pki/ -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			cli, r, err := dialEtcd(ctx, f)
			if err != nil {
				return err
			}
			defer cli.Close()
			ms, err := rollout.ObserveMembers(ctx, cli, r.Endpoints)
			if err != nil {
				return etcdFailed(ctx, err, r.Endpoints, f.timeout)
			}
			if output != "table" {
				return emit(cmd.OutOrStdout(), output, memberRows(ms))
			}
			printMembers(cmd.OutOrStdout(), ms)
			return nil
		},
	}
	addEtcdFlags(cmd, &f)
	addOutputFlag(cmd, &output, "output")
	return cmd
}

func newMembersRemoveCmd() *cobra.Command {
	var f etcdFlags
	cmd := &cobra.Command{
		Use:   "remove NODE (--endpoints URL[,URL...] --pki DIR | --etcd-endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Remove the member NODE (a name, or the hex ID of an unstarted member), quorum-checked",
		Long: `Remove takes the membership lock, checks that NODE is a member, not the
last one, and that the voters that remain keep a healthy quorum (each
member's health is its endpoint's answer to a status request), hands
leadership over when NODE leads, and removes it. A learner can always be
removed.

The node itself is not stopped: a node whose member was removed joins
again as a new member, unless it was decommissioned (etcdbox
decommission). Remove a node that is gone for good, or power it off first.`,
		Example: `  etcdbox members remove n3 --dir run/`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			cli, r, err := dialEtcd(ctx, f)
			if err != nil {
				return err
			}
			defer cli.Close()
			out := cmd.OutOrStdout()
			r.Logf = lineLogger(out)
			m, err := r.Remove(ctx, args[0])
			if err != nil {
				return fmt.Errorf("remove %s: %w", args[0], etcdFailed(ctx, err, r.Endpoints, f.timeout))
			}
			fmt.Fprintf(out, "removed member %s (%s)\n", orDefault(m.Name, "-"), strconv.FormatUint(m.ID, 16))
			return nil
		},
	}
	addEtcdFlags(cmd, &f)
	setDefaultTimeout(cmd, time.Minute)
	return cmd
}

// setDefaultTimeout gives cmd's --timeout another default.
func setDefaultTimeout(cmd *cobra.Command, d time.Duration) {
	fl := cmd.Flags().Lookup("timeout")
	_ = fl.Value.Set(d.String())
	fl.DefValue = fl.Value.String()
}

// memberRow is one member as list prints it.
type memberRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	Learner    bool     `json:"learner"`
	Started    bool     `json:"started"`
	Healthy    bool     `json:"healthy"`
	Problem    string   `json:"problem,omitempty"`
	Leader     bool     `json:"leader"`
}

func memberRows(ms rollout.Membership) []memberRow {
	rows := []memberRow{}
	for _, m := range ms.Members {
		rows = append(rows, memberRow{
			ID: strconv.FormatUint(m.ID, 16), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			Learner: m.Learner, Started: len(m.ClientURLs) > 0, Healthy: m.Healthy, Problem: m.Problem,
			Leader: m.ID == ms.Leader && ms.Leader != 0,
		})
	}
	return rows
}

// printMembers writes the table; a member's problem goes last, where
// tabwriter does not align.
func printMembers(out io.Writer, ms rollout.Membership) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tPEER URLS\tCLIENT URLS\tROLE\tSTARTED\tLEADER\tHEALTH")
	for _, r := range memberRows(ms) {
		role, health := "voter", "healthy"
		if r.Learner {
			role = "learner"
		}
		if !r.Healthy {
			health = "unhealthy: " + orDefault(r.Problem, "no answer")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, orDefault(r.Name, "-"), orDefault(strings.Join(r.PeerURLs, ","), "-"),
			orDefault(strings.Join(r.ClientURLs, ","), "-"), role, yesNo(r.Started), yesNo(r.Leader), health)
	}
	w.Flush()
}
