package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// QMP is a client of QEMU's machine protocol over a unix socket: JSON
// objects, one command at a time, with asynchronous events in between
// (which it skips).
//
// QEMU serves one QMP client at a time on a socket; others wait in the
// listen queue. VM's methods therefore dial per command and close.
type QMP struct {
	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	enc  *json.Encoder
	id   int
}

// QMPError is an error answer from QEMU.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return e.Class + ": " + e.Desc }

// DialQMP connects to the QMP socket at path and negotiates capabilities.
func DialQMP(ctx context.Context, path string) (*QMP, error) {
	conn, err := dialUnix(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("dial qmp %s: %w", path, err)
	}
	q := &QMP{conn: conn, dec: json.NewDecoder(conn), enc: json.NewEncoder(conn)}
	stop := q.watch(ctx)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	err = q.dec.Decode(&greeting)
	stop()
	if err == nil && greeting.QMP == nil {
		err = errors.New("no QMP greeting")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp greeting on %s: %w", path, ctxErr(ctx, err))
	}
	if err := q.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// Close closes the connection.
func (q *QMP) Close() error { return q.conn.Close() }

// Execute runs command with args (nil for none) and decodes the answer's
// return value into result (nil to discard it).
func (q *QMP) Execute(ctx context.Context, command string, args, result any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.id++
	id := q.id
	stop := q.watch(ctx)
	defer stop()
	req := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
		ID        int    `json:"id"`
	}{command, args, id}
	if err := q.enc.Encode(req); err != nil {
		return fmt.Errorf("qmp %s: %w", command, ctxErr(ctx, err))
	}
	for {
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *QMPError       `json:"error"`
			Event  string          `json:"event"`
			ID     *int            `json:"id"`
		}
		if err := q.dec.Decode(&resp); err != nil {
			return fmt.Errorf("qmp %s: %w", command, ctxErr(ctx, err))
		}
		switch {
		case resp.Event != "":
			continue
		case resp.ID != nil && *resp.ID != id:
			continue // the answer to an earlier, abandoned command
		case resp.Error != nil:
			return fmt.Errorf("qmp %s: %w", command, resp.Error)
		case resp.Return == nil:
			return fmt.Errorf("qmp %s: answer has neither return nor error", command)
		case result != nil:
			if err := json.Unmarshal(resp.Return, result); err != nil {
				return fmt.Errorf("qmp %s: decode return: %w", command, err)
			}
		}
		return nil
	}
}

// watch applies ctx's deadline and cancellation to the connection until
// the returned stop is called.
func (q *QMP) watch(ctx context.Context) (stop func()) {
	deadline, _ := ctx.Deadline() // zero: none
	q.conn.SetDeadline(deadline)
	unwatch := context.AfterFunc(ctx, func() { q.conn.SetDeadline(time.Unix(1, 0)) })
	return func() { unwatch() }
}

// ctxErr prefers ctx's error over the I/O timeout it caused.
func ctxErr(ctx context.Context, err error) error {
	// The connection's deadline is ctx's, and the socket can time out a
	// moment before ctx's own timer marks it done: give ctx that moment.
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// isClosed reports whether err means the peer closed the connection,
// which is how QEMU answers quit when it exits first.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
