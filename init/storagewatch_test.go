package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// TestStorageWatch: the watch says DATA LOW at the first look that finds
// it, again only after storageSayAgain while it lasts, and once when room
// comes back; a node that does not know its sizes says nothing.
func TestStorageWatch(t *testing.T) {
	const mib = 1 << 20
	room := nodeapi.Storage{DataBytes: 1536 * mib, DataFree: 1200 * mib, Quota: 589 * mib, DBSize: 100 * mib}
	low := nodeapi.Storage{DataBytes: 1536 * mib, DataFree: 300 * mib, Backups: 700 * mib, Quota: 589 * mib, DBSize: 200 * mib}
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var w storageWatch

	assert.Empty(t, w.next(at, room))
	assert.Empty(t, w.next(at, nodeapi.Storage{}), "sizes unknown")
	assert.Equal(t, "storage: DATA LOW: 300 MiB free of 1.5 GiB, but etcd's database (200 MiB) may still grow by 389 MiB before its quota (589 MiB) stops it, and its WAL needs up to 128 MiB: the disk can fill first, and etcd stops on a failed write; grow the disk (the node grows DATA with it at boot), or keep fewer backups (the seed's backup.keep; here they take 700 MiB)",
		w.next(at.Add(5*time.Minute), low))
	assert.Empty(t, w.next(at.Add(10*time.Minute), low), "said once")
	assert.Empty(t, w.next(at.Add(5*time.Minute+storageSayAgain-time.Second), low))
	assert.Contains(t, w.next(at.Add(5*time.Minute+storageSayAgain), low), "storage: DATA LOW: ", "said again after an hour")
	assert.Equal(t, "storage: DATA has room again: 1.2 GiB free, etcd's database 100 MiB of its quota 589 MiB", w.next(at.Add(2*time.Hour), room))
	assert.Empty(t, w.next(at.Add(3*time.Hour), room))
	assert.Contains(t, w.next(at.Add(3*time.Hour+time.Minute), low), "storage: DATA LOW: ", "low again: said at once")
}
