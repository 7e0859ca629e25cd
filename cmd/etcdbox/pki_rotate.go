package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/pki"
)

func newPKIRotateCACmd() *cobra.Command {
	var (
		dir   string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "rotate-ca --dir DIR",
		Short: "Make the next CA for a CA rotation, and the bundle clients must trust",
		Long: `Make the CA that is to replace the one in DIR: a new root with its own
admin certificate in DIR/next (ca.crt, ca.key, admin.crt, admin.key), named
etcdbox-ca-<UTC time>, and DIR/ca-bundle.crt, the old and the new root
together.

Then distribute ca-bundle.crt to every client of etcd (kube-apiservers,
etcdctl users) as its trusted CA, before the rotation's reissue phase,
and roll the new CA over the cluster with etcdbox rotate-ca, which
promotes DIR/next to DIR once every node is on it. An existing DIR/next
(a rotation prepared already) is replaced only with --force.`,
		Example: `  etcdbox pki rotate-ca --dir pki/
  etcdbox rotate-ca --endpoints 10.0.0.11,10.0.0.12,10.0.0.13 --pki pki/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return prepareRotation(dir, force, time.Now(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the current CA (etcdbox pki init)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing DIR/next")
	cmd.MarkFlagRequired("dir")
	return cmd
}

// prepareRotation makes DIR/next and DIR/ca-bundle.crt (see
// newPKIRotateCACmd).
func prepareRotation(dir string, force bool, now time.Time, out io.Writer) error {
	curPath := filepath.Join(dir, pki.CACertFile)
	curPEM, err := os.ReadFile(curPath)
	if err != nil {
		return fmt.Errorf("the current CA: %w", err)
	}
	cur, err := pki.ParseCertPEM(curPEM)
	if err != nil {
		return fmt.Errorf("the current CA %s: %w", curPath, err)
	}
	next := filepath.Join(dir, pki.NextDir)
	if _, err := os.Lstat(next); err == nil {
		if !force {
			return fmt.Errorf("%s: %w: a rotation is prepared already; roll it with etcdbox rotate-ca, or pass --force to make another next CA", next, fs.ErrExist)
		}
		// Nothing of the CA replaced may be promoted with the new one.
		if err := os.RemoveAll(next); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	name := "etcdbox-ca-" + now.UTC().Format("20060102-150405")
	if name == cur.Subject.CommonName {
		// A client tells the roots apart by name: never the same.
		name += "-2"
	}
	if err := pki.InitNamed(next, name, false); err != nil {
		return err
	}
	nextPEM, err := os.ReadFile(filepath.Join(next, pki.CACertFile))
	if err != nil {
		return err
	}
	bundle := append(bytes.TrimRight(curPEM, "\n"), '\n')
	bundle = append(bundle, nextPEM...)
	bundlePath := filepath.Join(dir, pki.BundleFile)
	if err := pki.WriteFileAtomic(bundlePath, bundle, 0o644); err != nil {
		return err
	}
	for _, f := range pki.InitFiles {
		fmt.Fprintln(out, filepath.Join(next, f))
	}
	fmt.Fprintln(out, bundlePath)
	fmt.Fprintf(out, `
The next CA is %q (the current one: %q). Next:
  1. Make every client of etcd trust %s (the old and the new root)
     before the rotation's reissue phase.
  2. Roll it over the cluster: etcdbox rotate-ca --pki %s --endpoints ...
     (a local cluster: etcdbox cluster rotate-ca --dir CLUSTERDIR).
     Once every node is on it, %s is promoted to %s.
`, name, cur.Subject.CommonName, bundlePath, dir, next, dir)
	return nil
}
