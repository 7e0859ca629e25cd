package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/pki"
)

// The pki verbs' --dir is a CA's directory, not a cluster's: ETCDBOX_DIR
// does not stand in for it.
func init() {
	envExempt["etcdbox pki issue-admin"] = true
	envExempt["etcdbox pki rotate-ca"] = true
}

// adminName is what an admin certificate's name may be: it becomes the
// certificate's common name and part of its file names.
var adminName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.@-]{0,63}$`)

type issueAdminFlags struct {
	dir, name, prefix string
	ttl               time.Duration
	force             bool
}

func newPKIIssueAdminCmd() *cobra.Command {
	var f issueAdminFlags
	cmd := &cobra.Command{
		Use:   "issue-admin --dir DIR --name NAME",
		Short: "Issue another admin client certificate from the CA in DIR",
		Long: `Issue an admin client certificate signed by the root CA in DIR (ca.crt,
ca.key, as etcdbox pki init writes them): common name NAME, the admin
URI SAN, client use only. It is written to PREFIX.crt and PREFIX.key (key
mode 0600); PREFIX defaults to DIR/admin-NAME. Existing files are never
replaced unless --force is given.

NAME is what nodes log for the certificate's requests: letters, digits,
'-', '.' and '@', at most 64.`,
		Example: `  etcdbox pki issue-admin --dir pki/ --name alice
  etcdbox pki issue-admin --dir pki/ --name ci@build --ttl 720h -o /secrets/ci`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			paths, err := issueAdmin(f)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "directory of the CA (ca.crt, ca.key)")
	fl.StringVar(&f.name, "name", "", "the certificate's name (its common name)")
	fl.DurationVar(&f.ttl, "ttl", pki.AdminValidity, "the certificate's lifetime (cut to the CA's)")
	fl.StringVarP(&f.prefix, "output", "o", "", "write PREFIX.crt and PREFIX.key (default DIR/admin-NAME)")
	fl.BoolVar(&f.force, "force", false, "replace existing files")
	cmd.MarkFlagRequired("dir")
	cmd.MarkFlagRequired("name")
	return cmd
}

// issueAdmin issues the certificate and returns the paths it wrote.
func issueAdmin(f issueAdminFlags) ([]string, error) {
	if !adminName.MatchString(f.name) {
		return nil, usageError{fmt.Errorf("--name %q: want letters, digits, '-', '.' and '@', at most 64, starting with a letter or digit", f.name)}
	}
	if f.ttl <= 0 {
		return nil, usageError{fmt.Errorf("--ttl %s: want a positive duration", f.ttl)}
	}
	prefix := f.prefix
	if prefix == "" {
		prefix = filepath.Join(f.dir, "admin-"+f.name)
	}
	certPath, keyPath := prefix+".crt", prefix+".key"
	if !f.force {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Lstat(p); err == nil {
				return nil, fmt.Errorf("%s: %w; pass --force to replace it", p, fs.ErrExist)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	ca, err := pki.LoadCAFiles(f.dir)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.IssueAdmin(f.name, f.ttl)
	if err != nil {
		return nil, err
	}
	if err := pki.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := pki.WriteFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return []string{certPath, keyPath}, nil
}
