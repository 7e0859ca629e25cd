package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes (README "Exit codes").
const (
	// exitError: a runtime error, or a status that is not all well (a
	// node unhealthy, unreachable, or its certificate near expiry).
	exitError = 1
	// exitUsage: the command line is wrong (an unknown command or flag,
	// a missing or conflicting flag, bad arguments).
	exitUsage = 2
)

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode is the process's exit status for what run returned.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(usageError)), isCobraUsage(err):
		return exitUsage
	}
	return exitError
}

// cobraUsage are the beginnings of the usage errors cobra returns as
// plain errors: its flag-group and required-flag checks.
var cobraUsage = []string{
	"required flag(s) ",
	"if any flags in the group ",
	"at least one of the flags in the group ",
	"unknown command ",
}

func isCobraUsage(err error) bool {
	for _, p := range cobraUsage {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

// markUsage makes every command of the tree report its usage errors as
// usageError: flag parsing, argument checks, and an unknown subcommand of
// a group, which cobra would otherwise answer with the group's help and
// exit status 0.
func markUsage(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
			}
			switch s := cmd.SuggestionsFor(args[0]); len(s) {
			case 0:
			case 1:
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			default:
				msg += fmt.Sprintf("; did you mean one of %q?", s)
			}
			return usageError{fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())}
		}
	} else if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsage(sub)
	}
}
