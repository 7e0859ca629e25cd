package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// tlsFlags say where a verb's admin certificate is: --pki DIR (ca.crt,
// admin.crt and admin.key, as pki init writes them), or --cacert, --cert
// and --key (any files, as etcdctl takes them), or neither with --dir
// (DIR/pki).
type tlsFlags struct {
	pkiDir string
	files  nodeapi.TLSFiles
}

// The names of the TLS flags, and the variables that stand in for them.
var (
	tlsFileFlags = []string{"cacert", "cert", "key"}
	tlsFileEnv   = []string{envCACert, envCert, envKey}
)

// add registers --pki, --cacert, --cert and --key; applyEnv and
// checkTLSFlags see to their combinations for every verb that has them.
func (f *tlsFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.pkiDir, "pki", "", "directory with ca.crt, admin.crt and admin.key (default DIR/pki with --dir)")
	fl.StringVar(&f.files.CACert, "cacert", "", "the CA certificate to trust (PEM), with --cert and --key instead of --pki")
	fl.StringVar(&f.files.Cert, "cert", "", "the admin certificate (PEM), with --cacert and --key instead of --pki")
	fl.StringVar(&f.files.Key, "key", "", "the admin certificate's key (PEM), with --cacert and --cert instead of --pki")
}

// resolve returns the files to load, and the PKI directory they are in
// ("" when --cacert, --cert and --key named them): the file flags, else
// --pki, else DIR/pki with dir.
func (f tlsFlags) resolve(dir string) (nodeapi.TLSFiles, string, error) {
	switch {
	case !f.files.IsZero():
		return f.files, "", nil
	case f.pkiDir != "":
		return nodeapi.AdminFiles(f.pkiDir), f.pkiDir, nil
	case dir != "":
		p := filepath.Join(dir, cluster.PKIDir)
		return nodeapi.AdminFiles(p), p, nil
	}
	return nodeapi.TLSFiles{}, "", errors.New("--pki is required with --endpoints, or --cacert, --cert and --key: the admin certificate (--pki DIR names DIR/ca.crt, DIR/admin.crt and DIR/admin.key)")
}

// checkTLSFlags refuses, as usage errors, --pki with any of --cacert,
// --cert and --key, and some of those three without the others.
func checkTLSFlags(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if fl.Lookup("cacert") == nil {
		return nil
	}
	var given, missing []string
	for _, name := range tlsFileFlags {
		if fl.Changed(name) {
			given = append(given, "--"+name)
		} else {
			missing = append(missing, "--"+name)
		}
	}
	switch {
	case len(given) > 0 && fl.Changed("pki"):
		return usageError{fmt.Errorf("--pki and %s: give either --pki DIR or --cacert, --cert and --key", strings.Join(given, ", "))}
	case len(given) > 0 && len(missing) > 0:
		return usageError{fmt.Errorf("--cacert, --cert and --key go together: %s given without %s", strings.Join(given, ", "), strings.Join(missing, ", "))}
	}
	return nil
}

// applyTLSEnv sets --pki, or --cacert, --cert and --key, from
// ETCDBOX_PKI or ETCDBOX_CACERT, ETCDBOX_CERT and ETCDBOX_KEY, when the
// command line gives none of the four flags and no --dir (whose default
// is DIR/pki; ETCDBOX_DIR counts as --dir once applied). Both kinds set,
// or only some of the three file variables, are usage errors.
func applyTLSEnv(cmd *cobra.Command, set func(name, env string) error) error {
	fl := cmd.Flags()
	if fl.Lookup("pki") == nil || fl.Changed("pki") || fl.Changed("dir") {
		return nil
	}
	hasFiles := fl.Lookup("cacert") != nil
	var fileVars, unset []string
	for i, name := range tlsFileFlags {
		if hasFiles && fl.Changed(name) {
			return nil // a flag wins; checkTLSFlags sees to the rest
		}
		if os.Getenv(tlsFileEnv[i]) != "" {
			fileVars = append(fileVars, tlsFileEnv[i])
		} else {
			unset = append(unset, tlsFileEnv[i])
		}
	}
	pkiVar := os.Getenv(envPKI) != ""
	if !hasFiles || len(fileVars) == 0 {
		if pkiVar {
			return set("pki", envPKI)
		}
		return nil
	}
	switch {
	case pkiVar:
		return usageError{fmt.Errorf("%s and %s are both set: unset one kind, or give --pki or --cacert, --cert and --key", envPKI, strings.Join(fileVars, ", "))}
	case len(unset) > 0:
		return usageError{fmt.Errorf("%s go together: %s set without %s", strings.Join(tlsFileEnv, ", "), strings.Join(fileVars, ", "), strings.Join(unset, ", "))}
	}
	for i, name := range tlsFileFlags {
		if err := set(name, tlsFileEnv[i]); err != nil {
			return err
		}
	}
	return nil
}
