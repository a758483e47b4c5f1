package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgrelay/pgrelay/events/store"
)

// spockStatus is what Spock says of node Node's replication.
type spockStatus struct {
	Node int
	store.SpockReplication
}

// readSpockStatus reads store.SpockStatus for node; ok is false when the
// database has no Spock node.
func readSpockStatus(ctx context.Context, q store.Querier, node int) (spockStatus, bool, error) {
	r, ok, err := store.SpockStatus(ctx, q)
	return spockStatus{Node: node, SpockReplication: r}, ok, err
}

// notReplicating lists the subscriptions whose status is not replicating.
func (s spockStatus) notReplicating() []string {
	var out []string
	for _, sub := range s.Subs {
		if sub.Status != "replicating" {
			out = append(out, sub.Name+" ("+sub.Status+")")
		}
	}
	return out
}

// lines is what `pgrelay nodes` prints of it: the subscriptions with their
// lag, and the apply exceptions.
func (s spockStatus) lines() string {
	var subs []string
	for _, sub := range s.Subs {
		l := fmt.Sprintf("%s from %s %s", sub.Name, sub.Provider, sub.Status)
		if sub.Lag != nil {
			l += fmt.Sprintf(", lag %s", sub.Lag.Round(time.Millisecond))
			if sub.LagBytes != nil {
				l += fmt.Sprintf(" (%d bytes)", *sub.LagBytes)
			}
		}
		subs = append(subs, l)
	}
	if len(subs) == 0 {
		subs = []string{"none"}
	}
	out := fmt.Sprintf("subscriptions (node %d, spock): %s\n", s.Node, strings.Join(subs, "; "))
	if s.Exceptions == 0 {
		return out + fmt.Sprintf("apply exceptions (node %d, spock): none in spock.exception_log", s.Node)
	}
	return out + fmt.Sprintf("apply exceptions (node %d, spock): %d in spock.exception_log, %d on pgrelay's tables; the latest: %s "+
		"(each is a transaction from another node this node skipped: docs/multi-master.md)", s.Node, s.Exceptions, s.OnPgrelay, s.Latest)
}
