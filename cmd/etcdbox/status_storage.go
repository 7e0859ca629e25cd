package main

import (
	"fmt"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// What status says of each node's storage (nodeapi.Storage): two columns,
// and notes when etcd's database nears its quota or when DATA could fill
// before the quota stops the database. The quota exists so that etcd
// raises NOSPACE (reads and deletes still work, and it can be cleared)
// before the disk is full, where etcd stops on a failed write.

// quotaWarn is the share of its quota at which a database is flagged.
const quotaWarn = 0.8

// walRoom is what etcd's WAL may need beside the database (the init keeps
// as much free when it takes backups, init/backups.go walReserve).
const walRoom = nodeapi.WALRoom

// storageCells are the DB and DATA FREE cells of a node's row: the
// database against its quota ("24K/589M"), and DATA's free space against
// its size ("1.3G/1.5G"); "-" for what the node does not report.
func storageCells(s nodeapi.Storage) (db, data string) {
	db, data = "-", "-"
	if s.DBSize > 0 && s.Quota > 0 {
		db = shortSize(s.DBSize) + "/" + shortSize(s.Quota)
	}
	if s.DataBytes > 0 {
		data = shortSize(s.DataFree) + "/" + shortSize(s.DataBytes)
	}
	return db, data
}

// storageNotes warn, for one node, of a database at quotaWarn of its quota
// or more, and of DATA with less free than the database may still grow
// plus walRoom.
func storageNotes(name string, s nodeapi.Storage) []string {
	if s.DBSize <= 0 || s.Quota <= 0 {
		return nil
	}
	var notes []string
	if float64(s.DBSize) >= quotaWarn*float64(s.Quota) {
		note := fmt.Sprintf("%s: DATABASE NEAR ITS QUOTA: %s of %s (%.0f%%); at the quota etcd raises NOSPACE and takes only reads and deletes",
			name, binarySize(s.DBSize), binarySize(s.Quota), 100*float64(s.DBSize)/float64(s.Quota))
		if s.DBInUse > 0 && s.DBInUse < s.DBSize*3/4 {
			note += fmt.Sprintf("; %s of it is in use, so etcdbox defrag (or maintain) would give back about %s", binarySize(s.DBInUse), binarySize(s.DBSize-s.DBInUse))
		} else {
			note += "; etcdbox maintain compacts the history and defragments"
		}
		notes = append(notes, note)
	}
	if grow, low := s.Low(); low {
		note := fmt.Sprintf("%s: DATA LOW: %s free, but the database may still grow by %s before its quota stops it, and its WAL needs up to %s: the disk can fill first, and etcd stops on a failed write; grow the disk (the node grows DATA with it at boot)",
			name, binarySize(s.DataFree), binarySize(grow), binarySize(walRoom))
		if s.Backups > 0 {
			note += fmt.Sprintf(", or keep fewer backups (the seed's backup.keep; here they take %s)", binarySize(s.Backups))
		}
		notes = append(notes, note)
	}
	return notes
}

// shortSize prints n bytes in the fewest characters: 512, 24K, 589M, 1.3G.
func shortSize(n int64) string {
	units := []string{"", "K", "M", "G", "T"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u > 0 && f < 10 {
		return fmt.Sprintf("%.1f%s", f, units[u])
	}
	return fmt.Sprintf("%.0f%s", f, units[u])
}

// binarySize prints n bytes in binary units: 512 bytes, 24 KiB, 589 MiB,
// 1.3 GiB.
func binarySize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
