//go:build !linux

package main

import (
	"fmt"
	"os"
)

// floorinit is a Linux PID 1; elsewhere it only builds.
func main() {
	fmt.Fprintln(os.Stderr, "floorinit: runs only as the PID 1 of a Linux guest")
	os.Exit(1)
}
