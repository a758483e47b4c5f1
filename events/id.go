package events

import "time"

// ID is a pgrelay id, as pgrelay._next_id() makes them for queue, log and
// notifier rows and Processor instances (docs/architecture.md#ids):
//
//	milliseconds since 2026-01-01 00:00 UTC << 22 | node << 12 | sequence
//
// 41 bits of milliseconds by PostgreSQL's clock, a 10-bit node id and a
// 12-bit per-node sequence.
type ID int64

// Layout of an ID.
const (
	idEpochMS = 1767225600000 // 2026-01-01 00:00 UTC in Unix milliseconds
	idSeqBits = 12
	idNodeBit = 10
)

// Time is when id was taken, by PostgreSQL's clock. A log row's event is
// stored in a stream at or after it.
func (id ID) Time() time.Time {
	return time.UnixMilli(idEpochMS + int64(id)>>(idNodeBit+idSeqBits)).UTC()
}

// Node is the node id of the node that took id.
func (id ID) Node() int { return int(int64(id)>>idSeqBits) & (1<<idNodeBit - 1) }

// Seq is id's sequence within its node and millisecond.
func (id ID) Seq() int { return int(id) & (1<<idSeqBits - 1) }
