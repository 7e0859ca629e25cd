package vnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// QEMU's stream and socket netdevs frame each Ethernet frame with its
// length as a 4-byte big-endian number (net/stream.c, net/socket.c).

// readFrame reads one framed Ethernet frame into a new slice.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		// The stream is out of step (or not QEMU); nothing after this
		// can be trusted.
		return nil, fmt.Errorf("frame of %d bytes: longer than %d", n, maxFrame)
	}
	f := make([]byte, n)
	if _, err := io.ReadFull(r, f); err != nil {
		return nil, err
	}
	return f, nil
}

// writeFrame frames f onto w.
func writeFrame(w *bufio.Writer, f []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(f)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(f)
	return err
}

// streamBuffer is the size of a stream port's read and write buffers: a
// port whose VM stops reading holds its queue (queueDepth frames) plus
// what fits in here before it drops.
const streamBuffer = 64 << 10

// serveStream runs port p over conn, a QEMU stream connection, until
// either side ends: frames read go into the switch, frames queued for p
// are written out, batched while more are waiting.
func (s *ethSwitch) serveStream(p *port, conn net.Conn) error {
	writeDone := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(conn, streamBuffer)
		for {
			select {
			case <-p.done:
				writeDone <- nil
				return
			case f := <-p.out:
				err := writeFrame(w, f)
				for more := err == nil; more; {
					select {
					case f := <-p.out:
						err = writeFrame(w, f)
						more = err == nil
					default:
						more = false
					}
				}
				if err == nil {
					err = w.Flush()
				}
				if err != nil {
					conn.Close() // ends the reader too
					writeDone <- err
					return
				}
			}
		}
	}()
	r := bufio.NewReaderSize(conn, streamBuffer)
	var err error
	for {
		var f []byte
		if f, err = readFrame(r); err != nil {
			break
		}
		s.ingress(p, f)
	}
	s.remove(p)
	conn.Close()
	if werr := <-writeDone; werr != nil && !closedConn(werr) {
		return werr
	}
	// QEMU's exit (even a kill) or our own close ends a port; neither is
	// an error.
	if closedConn(err) {
		return nil
	}
	return err
}

// closedConn reports whether err means that one end closed the
// connection.
func closedConn(err error) bool {
	for _, e := range []error{io.EOF, io.ErrClosedPipe, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
