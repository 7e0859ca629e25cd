package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

// version is etcdbox's version, set at build time by hack/build.sh with
// -ldflags "-X main.version=..."; empty means the module's version, or
// "dev".
var version string

// versionString is what `etcdbox version` and `etcdbox --version` print.
func versionString() string {
	v, etcd := version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "go.etcd.io/etcd/client/v3" {
				etcd = strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("etcdbox %s (etcd client %s, %s, %s/%s)", v, etcd, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print etcdbox's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
