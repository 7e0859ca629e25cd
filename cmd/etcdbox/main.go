// Command etcdbox builds bootable etcd node images and drives the clusters
// made from them.
//
//	etcdbox pki init --dir pki/
//	etcdbox build -o out/etcdbox.img
//	etcdbox build --format oci -o out/etcdbox.oci.tar
//	etcdbox cluster up --nodes 1 --dir run/
//
// Each verb lives in its own file and registers itself in commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// commands holds the constructors of the top-level verbs; each verb's file
// appends to it from an init function.
var commands []func() *cobra.Command

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbox:", err)
		os.Exit(exitCode(err))
	}
}

// run executes the CLI with args; tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newRoot builds the command tree: every verb, with its flags.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "etcdbox",
		Short:         "Immutable, bootable images for dedicated etcd nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
		// Before cobra checks required flags and flag groups, so that
		// a variable satisfies them as the flag would.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd) },
	}
	root.SetVersionTemplate("{{.Version}}\n")
	for _, c := range commands {
		root.AddCommand(c())
	}
	markUsage(root)
	return root
}
