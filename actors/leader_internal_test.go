package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events/store"
)

// A candidate leads on the answers to its ask, read in a step after the one
// that asked. The steps that took the lease and made the ask read nothing,
// and prove nothing however late they end: a step slow enough to end past
// --leader-settle (a loaded database) must not let the candidate lead
// without a single answer read, while another node's take made at the same
// moment may not have reached it yet.
func TestCandidateLeadsOnItsAsksAnswers(t *testing.T) {
	cfg := Config{LeaderSettle: 2 * time.Second, DeadAfter: 10 * time.Second}
	taken := time.Now()
	answered := store.SyncPeer{Node: 2, Answered: true, Alive: true}
	silent := store.SyncPeer{Node: 2, Alive: true}
	dead := store.SyncPeer{Node: 2}
	for _, c := range []struct {
		name  string
		asked bool // the ask made (its term known)
		m     leaseResult
		at    time.Duration // since the take
		want  bool
	}{
		{"the ask's step, before the settle", true, leaseResult{}, time.Second, false},
		{"the ask's step, ending past the settle", true, leaseResult{}, 3 * time.Second, false},
		{"no ask made yet, past the settle", false, leaseResult{}, 3 * time.Second, false},
		{"the read failed, past the settle", true, leaseResult{proofErr: errors.New("connection refused")}, 3 * time.Second, false},
		{"every peer answered", true, leaseResult{read: true, peers: []store.SyncPeer{answered}}, time.Second, true},
		{"no peer, before the settle", true, leaseResult{read: true}, time.Second, false},
		{"no peer, past the settle", true, leaseResult{read: true}, 3 * time.Second, true},
		{"a dead peer, past the settle", true, leaseResult{read: true, peers: []store.SyncPeer{dead}}, 3 * time.Second, true},
		{"a live peer silent, past the settle", true, leaseResult{read: true, peers: []store.SyncPeer{silent}}, 3 * time.Second, false},
	} {
		l := &leader{d: &deps{cfg: cfg}, candidate: 7, candidateAt: taken}
		if c.asked {
			l.candidateAsk, l.candidateAskAt = 3, taken.Add(100*time.Millisecond)
		}
		got, why := l.ready(&c.m, taken.Add(c.at))
		require.Equal(t, c.want, got, "%s (%s)", c.name, why)
	}
}
