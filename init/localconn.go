package main

import (
	"errors"
	"net"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// localConn is a client of the local member that exists only while the
// member's client port accepts connections. A client made while nothing
// listens sees etcd serve late: gRPC backs a refused connection off (1 s,
// then 1.6 times longer each try, up to 2 min), and etcd's client retries
// a request it cannot send until the request's deadline. Measured with
// bin/etcd on loopback after 4 s of refusals: a read through such a
// client first succeeded 1.0-1.5 s after etcd listened, through a fresh
// one after 60-80 ms; the longer the outage (etcd exited and the
// supervisor restarts it with its own backoff), the later. watchReady,
// which announces the member ready (the member loop and the health gate
// wait for that), reaches etcd through one.
type localConn struct {
	addr func() string // the member's client listener, host:port
	dial func() (*clientv3.Client, error)
	c    *clientv3.Client
}

// get returns the client, making it once the port accepts a connection;
// nil (and no error) while nothing listens there.
func (l *localConn) get() (*clientv3.Client, error) {
	if l.c != nil {
		return l.c, nil
	}
	if !listening(l.addr()) {
		return nil, nil
	}
	c, err := l.dial()
	if err != nil {
		return nil, err
	}
	l.c = c
	return c, nil
}

// failed is told that a request through the client failed: when the port
// refuses connections now (etcd exited), the client is dropped, so the
// next one is made fresh once a new etcd listens.
func (l *localConn) failed() {
	if l.c != nil && !listening(l.addr()) {
		l.close()
	}
}

func (l *localConn) close() {
	if l.c != nil {
		_ = l.c.Close()
		l.c = nil
	}
}

// listening reports whether addr accepts a TCP connection; only a refusal
// (ECONNREFUSED) says no, any other failure is left to the client.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return !errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = c.Close()
	return true
}
