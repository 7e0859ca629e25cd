package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Environment variables that stand in for the target flags, as etcdctl's
// ETCDCTL_* do; a flag on the command line always wins. A local cluster's
// etcdctl.env sets ETCDBOX_DIR, so one `source` serves etcdctl and
// etcdbox.
const (
	envEndpoints = "ETCDBOX_ENDPOINTS" // --endpoints
	envDir       = "ETCDBOX_DIR"       // --dir, a local cluster's directory
	envPKI       = "ETCDBOX_PKI"       // --pki, the directory of etcdbox pki init
	envCACert    = "ETCDBOX_CACERT"    // --cacert, with ETCDBOX_CERT and ETCDBOX_KEY instead of ETCDBOX_PKI
	envCert      = "ETCDBOX_CERT"      // --cert
	envKey       = "ETCDBOX_KEY"       // --key
)

// envExempt are the commands whose --dir is not a cluster's directory.
var envExempt = map[string]bool{"etcdbox pki init": true, "etcdbox cluster net": true}

// applyEnv sets cmd's --endpoints, --dir and --pki (or --cacert, --cert
// and --key) from the environment when the command line gives none of
// them, then checks the TLS flags' combination (checkTLSFlags).
// --endpoints and --dir name the target, so a target given on the command
// line (--endpoints, --etcd-endpoints or --dir) keeps every variable of
// the other kind out, and both variables set at once is a usage error.
func applyEnv(cmd *cobra.Command) error {
	fl := cmd.Flags()
	has := func(name string) bool { return fl.Lookup(name) != nil }
	given := func(name string) bool { f := fl.Lookup(name); return f != nil && f.Changed }
	set := func(name, env string) error {
		if err := fl.Set(name, os.Getenv(env)); err != nil {
			return usageError{fmt.Errorf("%s=%q: %w", env, os.Getenv(env), err)}
		}
		return nil
	}
	dirOK := has("dir") && !envExempt[cmd.CommandPath()]
	if !given("endpoints") && !given("etcd-endpoints") && !given("dir") {
		eps, dir := os.Getenv(envEndpoints) != "" && has("endpoints"), os.Getenv(envDir) != "" && dirOK
		switch {
		case eps && dir:
			return usageError{fmt.Errorf("%s and %s are both set: unset one, or give --endpoints or --dir", envEndpoints, envDir)}
		case eps:
			if err := set("endpoints", envEndpoints); err != nil {
				return err
			}
		case dir:
			if err := set("dir", envDir); err != nil {
				return err
			}
		}
	}
	// --pki defaults to DIR/pki with --dir; the variables are for the
	// other targets.
	if err := applyTLSEnv(cmd, set); err != nil {
		return err
	}
	return checkTLSFlags(cmd)
}
