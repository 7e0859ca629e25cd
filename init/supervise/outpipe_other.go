//go:build !linux

package supervise

import (
	"io"
	"os"
)

// newOutputPipe returns a pipe for a child's output: the parent's read
// end, and the child's write end. Off Linux (development builds) it is a
// plain os.Pipe; only the node's init needs the quiet read end of
// outpipe_linux.go.
func newOutputPipe() (io.ReadCloser, *os.File, error) {
	return os.Pipe()
}
