package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// A document carries its event's priority as "priority", in either schema,
// and only when it is not 0.
func TestPublishedPriority(t *testing.T) {
	t.Parallel()
	e := events.LogEvent{ID: 10, QueueID: 11, OriginID: 11, Channel: "c", Attempt: 1, Event: events.Succeeded,
		At: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)}
	for _, schema := range []int{events.SchemaNumericIDs, events.SchemaStringIDs} {
		for _, prio := range []int{5, -3, 0} {
			e.Priority = prio
			p := events.NewPublished(e, nil)
			p.Schema = schema
			data := mustFit(t, p, 0)
			var doc map[string]any
			require.NoError(t, json.Unmarshal(data, &doc))
			if prio == 0 {
				require.NotContains(t, doc, "priority", "%s", data)
			} else {
				require.Equal(t, float64(prio), doc["priority"], "%s", data)
			}
			var got events.Published
			require.NoError(t, json.Unmarshal(data, &got), "%s", data)
			require.Equal(t, prio, got.Priority)
		}
	}
}
