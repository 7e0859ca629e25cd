// Package benchmain is the main function of the bench commands whose run
// takes a context, the arguments and the output: it connects them to the
// process and turns run's error into the exit status.
package benchmain

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main calls run with a context that ends on SIGINT or SIGTERM, the
// command-line arguments after the program name, and standard output and
// error. When run fails, Main prints "<name>: <error>" to standard error
// and exits with status 1.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
