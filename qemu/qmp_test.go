package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeQMP serves the QMP protocol on a unix socket: a greeting, then for
// each command the lines reply(command) returns, with "ID" replaced by the
// request's id. It records the commands it saw.
type fakeQMP struct {
	t        *testing.T
	reply    func(cmd string) []string
	commands chan string
}

func (f *fakeQMP) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go f.handle(conn)
	}
}

func (f *fakeQMP) handle(conn net.Conn) {
	defer conn.Close()
	w := bufio.NewWriter(conn)
	send := func(s string) { w.WriteString(s + "\n"); w.Flush() }
	send(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}`)
	dec := json.NewDecoder(conn)
	for {
		var req struct {
			Execute string          `json:"execute"`
			ID      json.RawMessage `json:"id"`
		}
		if err := dec.Decode(&req); err != nil {
			return
		}
		f.commands <- req.Execute
		if req.Execute == "qmp_capabilities" {
			send(`{"return": {}, "id": ` + string(req.ID) + `}`)
			continue
		}
		lines := f.reply(req.Execute)
		if lines == nil {
			return // hang up without an answer, as an exiting QEMU does
		}
		for _, l := range lines {
			send(strings.ReplaceAll(l, "ID", string(req.ID)))
		}
	}
}

func startFakeQMP(t *testing.T, reply func(string) []string) (path string, commands chan string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	f := &fakeQMP{t: t, reply: reply, commands: make(chan string, 100)}
	go f.serve(l)
	return path, f.commands
}

func TestQMPExecute(t *testing.T) {
	path, commands := startFakeQMP(t, func(cmd string) []string {
		switch cmd {
		case "query-status":
			return []string{
				`{"event": "RESET", "timestamp": {"seconds": 1, "microseconds": 2}, "data": {"guest": false}}`,
				`{"return": {"status": "stale"}, "id": 999}`,
				`{"return": {"status": "running", "running": true}, "id": ID}`,
			}
		case "system_powerdown":
			return []string{`{"return": {}, "id": ID}`}
		case "nosuch":
			return []string{`{"error": {"class": "CommandNotFound", "desc": "The command nosuch has not been found"}, "id": ID}`}
		case "garbled":
			return []string{`{"id": ID}`}
		case "hang":
			time.Sleep(time.Hour)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := DialQMP(ctx, path)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, "qmp_capabilities", <-commands)

	var st struct{ Status string }
	require.NoError(t, q.Execute(ctx, "query-status", nil, &st), "events and stale answers are skipped")
	assert.Equal(t, "running", st.Status)
	assert.NoError(t, q.Execute(ctx, "system_powerdown", nil, nil))

	err = q.Execute(ctx, "nosuch", nil, nil)
	var qerr *QMPError
	require.ErrorAs(t, err, &qerr)
	assert.Equal(t, "CommandNotFound", qerr.Class)
	assert.ErrorContains(t, err, "qmp nosuch: CommandNotFound")

	assert.ErrorContains(t, q.Execute(ctx, "garbled", nil, nil), "neither return nor error")

	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	assert.ErrorIs(t, q.Execute(short, "hang", map[string]any{"x": 1}, nil), context.DeadlineExceeded)
}

func TestQMPQuitHangUp(t *testing.T) {
	// QEMU may exit before it answers quit; the VM treats the hang-up as
	// success. Here the fake stands in for QEMU via a VM whose QMP socket
	// it serves.
	path, _ := startFakeQMP(t, func(string) []string { return nil })
	v := &VM{name: "fake", dir: filepath.Dir(path), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, v.Quit(ctx))
	assert.Error(t, v.Reset(ctx), "a hang-up is an error for other commands")
}

func TestQMPGreetingRequired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte(`{"hello": 1}` + "\n"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = DialQMP(ctx, path)
	assert.ErrorContains(t, err, "no QMP greeting")
}

func TestDialUnixLongPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 120 {
		dir = filepath.Join(dir, "a-rather-long-directory-name")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Chdir(dir) // listen with a relative path, as QEMU does
	l, err := net.Listen("unix", "qmp.sock")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := dialUnix(context.Background(), filepath.Join(dir, "qmp.sock"))
	require.NoError(t, err)
	c.Close()
}
