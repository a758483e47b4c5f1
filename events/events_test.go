package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// A released claim is pending again: it ends nothing.
func TestReleaseIsNotTerminal(t *testing.T) {
	t.Parallel()
	require.False(t, events.Release.Terminal(), "a released claim is pending again")
}

// A retry or a discard of a dead letter does not end the notification: after
// a discard its status stays what it ended as, as pgrelay.status() says.
func TestFoldAfterRetryAndDiscard(t *testing.T) {
	t.Parallel()
	require.False(t, events.Retried.Terminal())
	require.False(t, events.Discarded.Terminal())
	log := []events.LogEvent{{Event: events.GaveUp}, {Event: events.Discarded}}
	s, ok := events.Fold(nil, log)
	require.True(t, ok)
	require.Equal(t, events.StatusGaveUp, s)
	log = []events.LogEvent{{Event: events.GaveUp}, {Event: events.Retried}}
	s, ok = events.Fold(&events.Row{Attempt: 1}, log)
	require.True(t, ok)
	require.Equal(t, events.StatusPending, s)
	s, ok = events.Fold(nil, append(log, events.LogEvent{Event: events.Succeeded}))
	require.True(t, ok)
	require.Equal(t, events.StatusSucceeded, s)
}

// An enqueued row starts a notification's log but ends nothing: with its
// queue row the event is pending, after an outcome that outcome is its
// status, and on its own (the outcome not written yet) it tells no status.
func TestFoldWithEnqueued(t *testing.T) {
	t.Parallel()
	require.False(t, events.Enqueued.Terminal())
	require.Contains(t, events.LogKinds(), events.Enqueued)
	log := []events.LogEvent{{Event: events.Enqueued}}
	s, ok := events.Fold(&events.Row{Attempt: 1}, log)
	require.True(t, ok)
	require.Equal(t, events.StatusPending, s)
	_, ok = events.Fold(nil, log)
	require.False(t, ok)
	s, ok = events.Fold(nil, append(log, events.LogEvent{Event: events.Failed}, events.LogEvent{Event: events.Succeeded}))
	require.True(t, ok)
	require.Equal(t, events.StatusSucceeded, s)
}
