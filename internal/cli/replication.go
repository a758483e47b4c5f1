package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/migrations"
)

// replication is what this database's node replicates of pgrelay's tables
// and the notifier's (store.Replication), with what the commands say of it.
type replication struct{ store.Replication }

// nodeLocalList is r.NodeLocal as "t (set s), ...".
func (r replication) nodeLocalList() string {
	out := make([]string, len(r.NodeLocal))
	for i, l := range r.NodeLocal {
		out[i] = l.String()
	}
	return strings.Join(out, ", ")
}

// checkReplication reads store.ReplicationOf for this database, the
// node-local tables being migrations.NodeLocalTables.
func checkReplication(ctx context.Context, q store.Querier) (replication, error) {
	r, err := store.ReplicationOf(ctx, q, migrations.NodeLocalTables())
	return replication{r}, err
}

// notifierMissing reports whether a table of the notifier is missing.
func (r replication) notifierMissing() bool {
	for _, t := range r.Missing {
		if strings.HasPrefix(t, "pgrelay_notifier.") {
			return true
		}
	}
	return false
}

// summary is what this node replicates: one line, two when node-local
// tables are replicated too.
func (r replication) summary() string {
	var line string
	switch {
	case r.Extension == "":
		return fmt.Sprintf("replication (node %d): no pglogical or Spock in this database: "+
			"nothing of pgrelay's is replicated (fine for one primary; multi-node and leader need it)", r.Node)
	case len(r.Missing) == 0:
		line = fmt.Sprintf("replication (node %d, %s): every table of pgrelay and pgrelay_notifier is in a subscribed replication set",
			r.Node, r.Extension)
	default:
		line = fmt.Sprintf("replication (node %d, %s): NOT REPLICATED: %s (add them to a replication set on every node: docs/multi-master.md)",
			r.Node, r.Extension, strings.Join(r.Missing, ", "))
	}
	if len(r.NodeLocal) > 0 {
		line += fmt.Sprintf("\nreplication (node %d, %s): WRONGLY REPLICATED: %s (each node keeps its own: %s)",
			r.Node, r.Extension, r.nodeLocalList(), r.nodeLocalFix())
	}
	return line
}

// nodeLocalFix says how to take r.NodeLocal out of replication.
func (r replication) nodeLocalFix() string {
	if r.Extension == "spock" {
		return "pgrelay migrate takes them out, or spock.repset_remove_table(set, table)"
	}
	return "pglogical.replication_set_remove_table(set, table)"
}
