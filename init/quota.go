package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The database quota's sizing (DESIGN §8): etcd's own default is 2 GiB
// whatever the disk, so on a small disk the disk fills before the quota,
// and bbolt then fails a write (etcd stops) instead of raising the NOSPACE
// alarm that keeps the cluster readable and can be cleared.
const (
	// quotaShare of DATA goes to the database: the rest holds the WAL,
	// etcd's snapshots, the backups and the copy a defragmentation makes.
	quotaShare = 40 // percent
	// quotaMax is the largest quota etcd suggests (storage.MaxQuotaBytes).
	quotaMax = 8 << 30
)

// backendQuota is etcd's --quota-backend-bytes for a node whose DATA
// filesystem holds dataBytes and whose database is dbBytes now (0 when
// there is none), given the seed's setting (0: size it). why says how it
// was chosen, for the log. A zero quota leaves etcd's default.
//
// A sized quota is never below 1.25 times the database: a node restarted
// on a disk where the share is smaller than what etcd already holds must
// not raise NOSPACE by itself (the cluster would turn read-only on a
// reboot); the log says so.
func backendQuota(seed, dataBytes, dbBytes int64) (quota int64, why string) {
	switch {
	case seed > 0:
		why = "from the seed"
		if dataBytes > 0 && seed > dataBytes/2 {
			why += fmt.Sprintf("; over half of DATA (%s): a defragmentation needs room for a copy of the database", size(dataBytes))
		}
		return seed, why
	case dataBytes <= 0:
		return 0, "DATA's size is unknown: etcd's default"
	}
	quota = min(dataBytes*quotaShare/100, quotaMax)
	why = fmt.Sprintf("%d%% of DATA (%s)", quotaShare, size(dataBytes))
	if quota == quotaMax {
		why = fmt.Sprintf("etcd's suggested maximum (DATA %s)", size(dataBytes))
	}
	if floor := dbBytes / 4 * 5; quota < floor {
		quota = floor
		why = fmt.Sprintf("1.25 times the database (%s), above %d%% of DATA (%s): grow the disk", size(dbBytes), quotaShare, size(dataBytes))
	}
	return quota, why
}

// dataSizes reads the size of the filesystem that holds root and of the
// etcd database under dataDir (0 when there is none yet).
func dataSizes(root, dataDir string) (dataBytes, dbBytes int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", root, err)
	}
	dataBytes = int64(st.Blocks) * int64(st.Bsize)
	if fi, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db")); err == nil {
		dbBytes = fi.Size()
	}
	return dataBytes, dbBytes, nil
}

// size prints n bytes in binary units; 0 is etcd's default quota.
func size(n int64) string {
	switch {
	case n == 0:
		return "etcd's default"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
