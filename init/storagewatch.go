package main

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The storage watch: a node says on its console and in its log when DATA
// has less free than etcd's database may still grow before its quota
// stops it, plus the WAL's room (nodeapi.Storage.Low). The quota's share
// of DATA exists so that etcd raises NOSPACE (readable, clearable) before
// the disk fills, where etcd stops on a failed write; kept backups, old
// data dirs moved aside, or a quota from the seed larger than the disk
// can take that room. etcdbox status shows the same (DATA LOW) to whoever
// asks; the log tells it to whoever reads the node.

// storageWatchEvery is how often the watch looks; storageSayAgain is how
// often it repeats itself while DATA stays low.
const (
	storageWatchEvery = 5 * time.Minute
	storageSayAgain   = time.Hour
)

// storageWatch is the watch's state: whether DATA was low at the last
// look, and when it last said so.
type storageWatch struct {
	low  bool
	said time.Time
}

// next returns what to log for a look at st at now, or "": the first look
// that finds DATA low, then one every storageSayAgain while it stays low,
// and the first look that finds room again.
func (w *storageWatch) next(now time.Time, st nodeapi.Storage) string {
	grow, low := st.Low()
	switch {
	case low && (!w.low || now.Sub(w.said) >= storageSayAgain):
		w.low, w.said = true, now
		line := fmt.Sprintf("storage: DATA LOW: %s free of %s, but etcd's database (%s) may still grow by %s before its quota (%s) stops it, and its WAL needs up to %s: the disk can fill first, and etcd stops on a failed write; grow the disk (the node grows DATA with it at boot)",
			size(st.DataFree), size(st.DataBytes), size(st.DBSize), size(grow), size(st.Quota), size(nodeapi.WALRoom))
		if st.Backups > 0 {
			line += fmt.Sprintf(", or keep fewer backups (the seed's backup.keep; here they take %s)", size(st.Backups))
		}
		return line
	case !low && w.low:
		w.low = false
		return fmt.Sprintf("storage: DATA has room again: %s free, etcd's database %s of its quota %s", size(st.DataFree), size(st.DBSize), size(st.Quota))
	}
	return ""
}

// watchStorage looks at DATA and etcd's database every storageWatchEvery
// while etcd answers, and logs what storageWatch says.
func (n *node) watchStorage(ctx context.Context) {
	t := time.NewTicker(storageWatchEvery)
	defer t.Stop()
	var w storageWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, ok := n.storageNow(ctx)
		if !ok {
			continue
		}
		if line := w.next(time.Now(), st); line != "" {
			n.log.Printf("%s", line)
		}
	}
}

// storageNow is storageStatus with the database's size as etcd reports
// it; false when etcd does not run or answer.
func (n *node) storageNow(ctx context.Context) (nodeapi.Storage, bool) {
	if n.supervisor() == nil {
		return nodeapi.Storage{}, false
	}
	c, err := n.localMember().client()
	if err != nil {
		return nodeapi.Storage{}, false
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.Status(sctx, c.Endpoints()[0])
	if err != nil {
		return nodeapi.Storage{}, false
	}
	return withEtcdStatus(n.storageStatus(), s), true
}

// withEtcdStatus adds to st what etcd's status says of its database: its
// size, what of it is in use, and the quota etcd runs with.
func withEtcdStatus(st nodeapi.Storage, s *clientv3.StatusResponse) nodeapi.Storage {
	st.DBSize, st.DBInUse = s.DbSize, s.DbSizeInUse
	if s.DbSizeQuota > 0 {
		st.Quota = s.DbSizeQuota
	}
	return st
}
