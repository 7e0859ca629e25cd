package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/pki"
)

func init() { commands = append(commands, newPKICmd) }

// newPKICmd is `etcdbox pki`: the cluster's certificates.
func newPKICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Manage the cluster CA and admin certificate",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPKIInitCmd(), newPKISigningKeyCmd(), newPKIIssueAdminCmd(), newPKIRotateCACmd())
	return cmd
}

func newPKIInitCmd() *cobra.Command {
	var (
		dir   string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "init --dir DIR",
		Short: "Create a cluster CA and an admin client certificate",
		Long: `Create a cluster CA and an admin client certificate in DIR:
ca.crt, ca.key, admin.crt and admin.key. Keys get mode 0600. An existing CA
is never replaced unless --force is given.

Put ca.crt and ca.key into the seed's pki section so that nodes issue their
own certificates; use admin.crt and admin.key with etcdctl.`,
		Example: "  etcdbox pki init --dir pki/",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pki.Init(dir, force); err != nil {
				return err
			}
			for _, name := range pki.InitFiles {
				fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(dir, name))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the CA and admin certificate to (created with mode 0700)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing CA and admin certificate")
	cmd.MarkFlagRequired("dir")
	return cmd
}
