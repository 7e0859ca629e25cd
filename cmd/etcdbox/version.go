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

// versionInfo is etcdbox version -o json and -o yaml.
type versionInfo struct {
	// Version is etcdbox's; EtcdClient the etcd client module's it links.
	Version    string `json:"version"`
	EtcdClient string `json:"etcdClient"`
	// Go is the Go release it was built with; OS and Arch its platform.
	Go   string `json:"go"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// buildVersion is this binary's versionInfo.
func buildVersion() versionInfo {
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
	return versionInfo{Version: v, EtcdClient: etcd, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// String is the line etcdbox version prints.
func (v versionInfo) String() string {
	return fmt.Sprintf("etcdbox %s (etcd client %s, %s, %s/%s)", v.Version, v.EtcdClient, v.Go, v.OS, v.Arch)
}

// versionString is what `etcdbox version` and `etcdbox --version` print.
func versionString() string { return buildVersion().String() }

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print etcdbox's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if output != "table" {
				return emit(cmd.OutOrStdout(), output, buildVersion())
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
	addOutputFlag(cmd, &output, "output")
	return cmd
}
