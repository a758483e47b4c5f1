package actors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/store"
)

// peersReady: every peer answered proves it at once; a peer that looks dead
// waits for the settle, one that looks alive for the answer (or, overdue, a
// pgrelay that does not answer); no answers read, or no peer, the settle.
func TestRejoinReady(t *testing.T) {
	answered := store.SyncPeer{Node: 1, Answered: true, Alive: true}
	dead := store.SyncPeer{Node: 2}
	silent := store.SyncPeer{Node: 3, Alive: true}
	for _, c := range []struct {
		name                   string
		peers                  []store.SyncPeer
		read, settled, overdue bool
		want                   bool
	}{
		{"all answered", []store.SyncPeer{answered}, true, false, false, true},
		{"nothing read yet", nil, false, false, false, false},
		{"nothing read, settled", nil, false, true, false, true},
		{"no peer", nil, true, false, false, false},
		{"no peer, settled", nil, true, true, false, true},
		{"a dead peer", []store.SyncPeer{answered, dead}, true, false, false, false},
		{"a dead peer, settled", []store.SyncPeer{answered, dead}, true, true, false, true},
		{"a live peer silent, settled", []store.SyncPeer{answered, silent}, true, true, false, false},
		{"a live peer silent, overdue", []store.SyncPeer{answered, silent}, true, true, true, true},
		{"a live peer silent and a dead one, overdue, not settled", []store.SyncPeer{silent, dead}, true, false, true, false},
	} {
		got, why := peersReady(c.peers, c.read, c.settled, c.overdue)
		require.Equal(t, c.want, got, c.name)
		require.Equal(t, got, why != "", c.name)
	}
}
