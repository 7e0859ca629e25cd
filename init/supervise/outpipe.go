package supervise

import (
	"io"
	"time"
)

// outputPause is how long the output copy of a Supervisor's child waits
// after each read before it reads again. A child that logs a burst of
// lines hands them over in a few reads, not in one read and one wakeup of
// the parent per line. One-shot tools (Run, Output, RunTool) do not
// pause: a pause would add to every run.
//
// etcd under load logs a line for most slow requests, about 130 lines a
// second per member at 256 clients under software emulation. Each line
// was one write(2) of etcd that woke the init, and on a 1-vCPU VM every
// such wakeup is a switch from etcd to the init and back. bench/throughput
// put the appliance's etcd at 0.81-0.88x of the same etcd with mutual TLS
// on the same VM, writing its log to the console itself (the TLS floor),
// at 256 clients, and at 0.97-1.02x at 1 and 16. A pause alone was not
// enough (0.85x): the Go runtime's poller is woken by every write to a
// pipe it watches, whether or not a read waits on it. So the parent's end
// of the pipe is kept out of the poller as well (see newOutputPipe).
// Together they read 0.97-0.99x at 256 clients.
//
// The pipe holds 64 KiB, which a child fills in one pause only by
// logging more than 1.3 MB a second; it then waits in write(2) until the
// copy reads, as it would with any slow reader. A line reaches the ring
// and the console at most this much later.
const outputPause = 50 * time.Millisecond

// copyOutput copies r to w until r ends, pausing between reads until
// exited is closed: what a child wrote before its exit is read at once,
// so a stop or a restart waits for no pause.
func copyOutput(w io.Writer, r io.Reader, pause time.Duration, exited <-chan struct{}) {
	buf := make([]byte, 64<<10)
	var t *time.Timer
	if pause > 0 {
		t = time.NewTimer(pause)
		defer t.Stop()
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
		if t != nil {
			t.Reset(pause)
			select {
			case <-t.C:
			case <-exited:
			}
		}
	}
}
