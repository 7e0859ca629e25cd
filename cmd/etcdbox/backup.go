package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// The backup verbs: the snapshots the nodes keep (the seed's backup
// section schedules them), taken, listed and fetched through the node API.

func init() { commands = append(commands, newBackupCmd) }

func newBackupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Take, list and fetch the cluster's backups (verified etcd snapshots the nodes keep)",
		Long: `The node that holds the cluster's backup election snapshots a member (a
follower when one answers) every backup.interval of the seed, verifies the
snapshot (the SHA-256 etcd appends, and its database read whole) and keeps
the newest backup.keep on its DATA. These verbs take one now, list what
every node keeps, and fetch one to a file, verified again on arrival.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBackupNowCmd(), newBackupListCmd(), newBackupGetCmd())
	return cmd
}

// nodeClients calls do with a client of each target's API, in order,
// until do returns false; a target that cannot be asked goes to skip.
func (f *nodeFlags) each(ctx context.Context, do func(name string, c *nodeapi.Client) bool, skip func(name string, err error)) error {
	targets, files, err := nodeTargets(f.dir, f.tls, f.endpoints)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if t.err != nil {
			skip(t.name, t.err)
			continue
		}
		c, err := nodeapi.NewClientFiles(t.endpoint, files)
		if err != nil {
			skip(t.name, err)
			continue
		}
		more := do(t.name, c)
		c.Close()
		if !more {
			break
		}
	}
	return nil
}

func newBackupNowCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "now [NODE] (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Take a backup now, on NODE or the first node that answers",
		Example: `  etcdbox backup now --dir run/cluster
  etcdbox backup now n2 --endpoints https://10.0.0.12:9379 --pki pki/`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			report := func(s nodeapi.Snapshot, on string) {
				fmt.Fprintf(out, "%s: %s of member %s, %d bytes, revision %d, %d keys, verified\n", on, s.Name, s.Member, s.Size, s.Revision, s.Keys)
			}
			if len(args) == 1 {
				return f.with(cmd.Context(), args[0], func(ctx context.Context, c *nodeapi.Client) error {
					s, err := c.Backup(ctx)
					if err != nil {
						return fmt.Errorf("backup on %s: %w", args[0], err)
					}
					report(s, args[0])
					return nil
				})
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			var errs []error
			done := false
			err := f.each(ctx, func(name string, c *nodeapi.Client) bool {
				s, err := c.Backup(ctx)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					return true
				}
				report(s, name)
				done = true
				return false
			}, func(name string, err error) { errs = append(errs, fmt.Errorf("%s: %w", name, err)) })
			if err != nil {
				return err
			}
			if !done {
				return fmt.Errorf("no node took a backup: %w", errors.Join(errs...))
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().Lookup("timeout").DefValue = "5m0s"
	_ = cmd.Flags().Set("timeout", "5m")
	return cmd
}

// backupRow is one kept snapshot of backup list: where it is, and what.
type backupRow struct {
	Node string `json:"node"`
	nodeapi.Snapshot
}

// pushedRows are the backups pushed to a registry, as backup list's rows.
func pushedRows(pushed []backup.Pushed) []backupRow {
	var rows []backupRow
	for _, p := range pushed {
		rows = append(rows, backupRow{Node: "(pushed)", Snapshot: nodeapi.Snapshot{Name: p.Ref, Member: p.Member, Size: p.Size,
			Revision: p.Revision, Keys: p.Keys, SHA256: p.SHA256, Taken: p.Taken}})
	}
	return rows
}

func newBackupListCmd() *cobra.Command {
	var (
		f      nodeFlags
		rf     registryFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list (--endpoints URL[,URL...] --pki DIR | --dir DIR) [--registry REPO]",
		Short: "List the backups every node keeps, and those pushed to REPO: name, member, revision, keys, size, age",
		Example: `  etcdbox backup list --dir run/cluster -o json
  etcdbox backup list --dir run/cluster --registry 10.0.0.5:5000/etcdbox/backups --insecure-registry`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			rows := []backupRow{}
			var problems []error
			if rf.repository != "" {
				pushed, err := backup.ListPushed(ctx, rf.registry(rf.repository))
				if err != nil {
					problems = append(problems, err)
				}
				rows = append(rows, pushedRows(pushed)...)
			}
			err := f.each(ctx, func(name string, c *nodeapi.Client) bool {
				snaps, err := c.Backups(ctx)
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", name, err))
				}
				for _, s := range snaps {
					rows = append(rows, backupRow{Node: name, Snapshot: s})
				}
				return true
			}, func(name string, err error) { problems = append(problems, fmt.Errorf("%s: %w", name, err)) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != "table" {
				if err := emit(out, output, rows); err != nil {
					return err
				}
			} else {
				printBackups(out, rows, time.Now())
			}
			if len(problems) > 0 {
				return fmt.Errorf("not every node answered: %w", errors.Join(problems...))
			}
			return nil
		},
	}
	f.add(cmd)
	rf.add(cmd, "list the backups pushed to this OCI repository too (host[:port]/path)")
	addOutputFlag(cmd, &output, "output")
	return cmd
}

// registryFlags name a registry of pushed backups; the password comes
// from the environment, never from a flag (ps would show it).
type registryFlags struct {
	repository string
	insecure   bool
	username   string
}

func (rf *registryFlags) add(cmd *cobra.Command, usage string) {
	fl := cmd.Flags()
	if usage != "" {
		fl.StringVar(&rf.repository, "registry", "", usage)
	}
	fl.BoolVar(&rf.insecure, "insecure-registry", false, "reach the registry over plain HTTP (a closed local network)")
	fl.StringVar(&rf.username, "registry-user", "", "the registry's user name; the password is read from $ETCDBOX_REGISTRY_PASSWORD")
}

// registry is the registry of repo (a repository, or a reference in it).
func (rf *registryFlags) registry(repo string) backup.Registry {
	return backup.Registry{Repository: repo, Insecure: rf.insecure, Username: rf.username, Password: os.Getenv("ETCDBOX_REGISTRY_PASSWORD")}
}

// pullBackup copies the pushed backup ref into w and returns the SHA-256
// its annotations name.
func (rf *registryFlags) pullBackup(ctx context.Context, ref string, w io.Writer) (from, sum string, err error) {
	p, err := backup.Pull(ctx, rf.registry(ref), ref, w)
	if err != nil {
		return "", "", err
	}
	return "the registry (cluster " + p.Cluster + ", member " + p.Member + ")", p.SHA256, nil
}

func printBackups(out io.Writer, rows []backupRow, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(out, "no backups")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAME\tMEMBER\tREVISION\tKEYS\tSIZE\tAGE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Node, r.Name, orDefault(r.Member, "-"), r.Revision, r.Keys, r.Size, roughDuration(now.Sub(r.Taken)))
	}
	tw.Flush()
}

func newBackupGetCmd() *cobra.Command {
	var (
		f      nodeFlags
		rf     registryFlags
		node   string
		output string
	)
	cmd := &cobra.Command{
		Use:   "get NAME|REF -o FILE [--node NODE] (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Fetch the backup NAME (as backup list names it), or a pushed one by digest, into FILE, verified",
		Long: `Get streams the kept snapshot NAME from the node that keeps it (or from
--node) into FILE, and verifies it as the node did before it kept it: the
SHA-256 etcd appended (and the one the node names), and the database read
whole. FILE is written only when all of that holds, and never
overwritten. A reference by digest (host[:port]/path@sha256:..., as backup
list --registry shows it) is pulled from that registry instead, every byte
checked against the digest, then verified the same way.`,
		Example: "  etcdbox backup get etcd-20261202T071635.917687499Z.db -o before-upgrade.db --dir run/cluster",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return writeVerified(cmd.OutOrStdout(), output, name, func(w io.Writer) (from, sum string, err error) {
				if backup.IsRef(name) {
					return rf.pullBackup(ctx, name, w)
				}
				return f.fetchBackup(ctx, node, name, w)
			})
		},
	}
	f.add(cmd)
	rf.add(cmd, "")
	cmd.Flags().StringVar(&node, "node", "", "the node to fetch it from (default: the one that keeps it)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (required; never overwritten)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// writeVerified writes the snapshot fetch copies into output, a new file,
// only once it verifies as the node verified it before keeping it: the
// SHA-256 etcd appended (and the one the node names, sum), and the
// database read whole. It never replaces a file.
func writeVerified(out io.Writer, output, name string, fetch func(io.Writer) (from, sum string, err error)) error {
	if _, err := os.Stat(output); err == nil {
		return fmt.Errorf("-o %s: exists; give a new file", output)
	}
	tmp, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*")
	if err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	defer os.Remove(tmp.Name())
	from, sum, err := fetch(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	st, err := backup.Verify(tmp.Name())
	if err != nil {
		return fmt.Errorf("%s from %s: %w", name, from, err)
	}
	if sum != "" && sum != st.SHA256 {
		return fmt.Errorf("%s from %s: the node names SHA-256 %s, the file holds %s", name, from, sum, st.SHA256)
	}
	// A link, not a rename: it fails rather than replace a file that
	// appeared meanwhile.
	if err := os.Link(tmp.Name(), output); err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	fmt.Fprintf(out, "wrote %s: %s from %s, revision %d, %d keys, hash %d, verified\n", output, name, from, st.Revision, st.Keys, st.Hash)
	return nil
}

// fetchBackup copies the kept snapshot name into w from the first node
// (or the node called node) that lists it, and returns that node and the
// SHA-256 it names.
func (f *nodeFlags) fetchBackup(ctx context.Context, node, name string, w io.Writer) (from, sum string, err error) {
	var problems []error
	err = f.each(ctx, func(n string, c *nodeapi.Client) bool {
		if node != "" && n != node {
			return true
		}
		snaps, err := c.Backups(ctx)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", n, err))
			return true
		}
		for _, s := range snaps {
			if s.Name != name {
				continue
			}
			if sum, err = c.GetBackup(ctx, name, w); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", n, err))
				return true
			}
			from = n
			return false
		}
		return true
	}, func(n string, err error) { problems = append(problems, fmt.Errorf("%s: %w", n, err)) })
	if err == nil && from == "" {
		err = fmt.Errorf("no node keeps %s (etcdbox backup list names them)%s", name, joinedSuffix(problems))
	}
	return from, sum, err
}

func joinedSuffix(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return "; " + errors.Join(errs...).Error()
}
