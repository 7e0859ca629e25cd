package supervise

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// childPipes connects a command's Stdin, Stdout and Stderr that are not
// *os.File through pipes, as exec.Cmd does, for Start.
type childPipes struct {
	p         *Process
	childEnds []*os.File    // the child's ends, closed in the parent once it started
	copies    []func()      // output copies, run once the child started
	pause     time.Duration // between an output copy's reads
}

// connect replaces cmd's non-file Stdin, Stdout and Stderr with pipes;
// Stdout and Stderr that are the same writer share one pipe. The caller
// restores cmd's fields afterwards.
func (c *childPipes) connect(cmd *exec.Cmd) error {
	stdin, stdout, stderr := cmd.Stdin, cmd.Stdout, cmd.Stderr
	if _, isFile := stdin.(*os.File); stdin != nil && !isFile {
		pr, err := c.inPipe(stdin)
		if err != nil {
			return fmt.Errorf("start %s: stdin pipe: %w", cmd.Path, err)
		}
		cmd.Stdin = pr
	}
	if _, isFile := stdout.(*os.File); stdout != nil && !isFile {
		pw, err := c.outPipe(stdout)
		if err != nil {
			return fmt.Errorf("start %s: stdout pipe: %w", cmd.Path, err)
		}
		cmd.Stdout = pw
	}
	if _, isFile := stderr.(*os.File); stderr != nil && !isFile {
		if sameWriter(stderr, stdout) {
			cmd.Stderr = cmd.Stdout
		} else {
			pw, err := c.outPipe(stderr)
			if err != nil {
				return fmt.Errorf("start %s: stderr pipe: %w", cmd.Path, err)
			}
			cmd.Stderr = pw
		}
	}
	return nil
}

// inPipe returns the child's end of a pipe that a goroutine fills from r.
func (c *childPipes) inPipe(r io.Reader) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.childEnds, c.p.stdin = append(c.childEnds, pr), pw
	// Not waited for: a reader that blocks would block Wait. The
	// pipe is closed by Wait, which ends the copy at its next write.
	go func() {
		_, _ = io.Copy(pw, r)
		_ = pw.Close()
	}()
	return pr, nil
}

// outPipe returns the child's end of a pipe whose output is copied to w
// once the child started.
func (c *childPipes) outPipe(w io.Writer) (*os.File, error) {
	pr, pw, err := newOutputPipe()
	if err != nil {
		return nil, err
	}
	c.childEnds, c.p.readers = append(c.childEnds, pw), append(c.p.readers, pr)
	c.copies = append(c.copies, func() {
		defer c.p.copies.Done()
		copyOutput(w, pr, c.pause, c.p.done)
	})
	return pw, nil
}

// started closes the child's ends in the parent and starts the output
// copies.
func (c *childPipes) started() {
	closeAll(c.childEnds...)
	c.p.copies.Add(len(c.copies))
	for _, cp := range c.copies {
		go cp()
	}
}

// abort closes every pipe after the child failed to start.
func (c *childPipes) abort() {
	closeAll(c.childEnds...)
	closeAll(c.p.readers...)
	if c.p.stdin != nil {
		_ = c.p.stdin.Close()
	}
}
