package main

import (
	"time"

	fig "github.com/etcdbox/etcdbox/bench/internal/figures"
)

// record records the printed figures for bench.json, each with the
// reference its printed ratio uses (bench/internal/figures).
func record(u upFigures, f figures, dr drFigures) error {
	s := func(key, name string, d time.Duration) fig.Figure {
		return fig.Figure{Key: key, Name: name, Value: d.Seconds(), Unit: "s"}
	}
	oneUp, start, reboot := u.one.Seconds(), u.start.Seconds(), dr.reboot.Seconds()
	up3 := s("cluster.up3", "3-node cluster up, until 3 voters", u.three).Ref("three 1-node clusters up at once, until all serve", u.solos.Seconds())
	up3.Goal = "<= 1.1x"
	return fig.Record("cluster",
		up3,
		s("cluster.up1", "1-node cluster up, until it serves", u.one),
		s("cluster.add", "cluster add, until the new member votes", u.add),
		s("cluster.peer-lost", "kill of a node, until a peer reports it lost", u.lost),
		s("cluster.restart", "start of the killed node, until the cluster is whole again", u.start).Ref("a 1-node cluster up", oneUp),
		s("cluster.failover", "kill of the leader under the writer: longest write gap", f.failover).Ref("etcd's election timeout", electionTimeout.Seconds()),
		s("cluster.wiped", "a wiped node's start, until it votes again", f.wiped).Ref("the plain start of a killed node", start),
		s("cluster.cold", "cold start of 3 (down, up), until 3 voters", f.cold).Ref("a 1-node cluster up", oneUp),
		s("cluster.restore", "restore of 3 nodes to a backup, until 3 voters", dr.restore).Ref("a reset of one node, until whole again", reboot),
		s("cluster.quorum-lost", "2 of 3 killed, until the survivor says the quorum is lost", dr.detect),
		s("cluster.recover", "recover --survivor, until it serves", dr.recover).Ref("a reset of one node, until whole again", reboot),
		s("cluster.rejoin", "2 empty disks started after a recover, until 3 voters", dr.rejoin).Ref("a reset of one node, until whole again", reboot),
	)
}
