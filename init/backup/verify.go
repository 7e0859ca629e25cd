package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// Stats is what a verified snapshot holds, as `etcdutl snapshot status`
// reports it: the revision, the number of live keys and the CRC-32C hash
// of the buckets' contents; with the SHA-256 etcd appends to the
// snapshot stream.
type Stats struct {
	Revision int64  `json:"revision"`
	Keys     int    `json:"keys"`
	Hash     uint32 `json:"hash"`
	SHA256   string `json:"sha256"`
}

// ErrBadSnapshot means a snapshot file is not what etcd sent: its
// appended SHA-256 does not match, or its database does not read.
var ErrBadSnapshot = errors.New("bad snapshot")

// Verify checks the snapshot file at path as etcd's Snapshot call wrote
// it: the database, then the SHA-256 of the database. The digest must
// match, and the database must open and read to its last key; it returns
// what it holds. It is what etcdutl snapshot restore checks before it
// uses a snapshot, done before the snapshot is kept.
func Verify(path string) (Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Stats{}, err
	}
	// etcd's database is whole pages; the stream adds the digest.
	if fi.Size()%512 != sha256.Size {
		return Stats{}, fmt.Errorf("%s: %d bytes, not a database followed by its SHA-256: %w", path, fi.Size(), ErrBadSnapshot)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, fi.Size()-sha256.Size)); err != nil {
		return Stats{}, err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return Stats{}, err
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return Stats{}, fmt.Errorf("%s: SHA-256 %x, the snapshot says %x: %w", path, got, want, ErrBadSnapshot)
	}
	st, err := DatabaseStats(path)
	if err != nil {
		return Stats{}, fmt.Errorf("%s: %w: %w", path, ErrBadSnapshot, err)
	}
	st.SHA256 = hex.EncodeToString(want)
	return st, nil
}

// DatabaseStats checks the bbolt database at path (a snapshot without its
// digest, or a member's member/snap/db) page by page (bolt's own
// consistency check) and reads every bucket, as etcdutl's snapshot status
// does: the hash covers each bucket's name and every key and value in it,
// the revision is the last one of the "key" bucket, and the keys are
// those alive at that revision. SHA256 stays empty.
func DatabaseStats(path string) (Stats, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return Stats{}, err
	}
	defer db.Close()
	var st Stats
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	live := map[string]bool{}
	err = db.View(func(tx *bolt.Tx) error {
		var problems []error
		for err := range tx.Check() { // read to its end: it closes when done
			problems = append(problems, err)
		}
		if len(problems) > 0 {
			return fmt.Errorf("database check: %w", errors.Join(problems...))
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			h.Write(name)
			keyBucket := string(name) == "key"
			return b.ForEach(func(k, v []byte) error {
				h.Write(k)
				h.Write(v)
				if !keyBucket {
					return nil
				}
				if len(k) < revBytes {
					return fmt.Errorf("revision key of %d bytes", len(k))
				}
				st.Revision = int64(binary.BigEndian.Uint64(k))
				var kv mvccpb.KeyValue
				if err := proto.Unmarshal(v, &kv); err != nil {
					return fmt.Errorf("revision %d: %w", st.Revision, err)
				}
				// A tombstone (a delete) ends the key's life.
				live[string(kv.Key)] = !(len(k) == revBytes+1 && k[revBytes] == 't')
				return nil
			})
		})
	})
	if err != nil {
		return Stats{}, err
	}
	for _, alive := range live {
		if alive {
			st.Keys++
		}
	}
	st.Hash = h.Sum32()
	return st, nil
}

// revBytes is the length of a revision key of etcd's "key" bucket: the
// main revision, '_', the sub revision; a tombstone adds a 't'.
const revBytes = 8 + 1 + 8
