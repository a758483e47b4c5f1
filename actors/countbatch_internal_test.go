package actors

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
)

// A batch's outcomes reach the metrics by channel and outcome, and each
// event that ran its handler is observed once; unrecorded events count as
// released.
func TestCountBatchCountsEachEventOnce(t *testing.T) {
	m, err := NewMetrics(nil)
	require.NoError(t, err)
	d := &deps{metrics: m}
	kinds := []events.Kind{events.Succeeded, events.Succeeded, events.Failed, events.Succeeded, "", events.Expired,
		events.GaveUp, events.Succeeded}
	var evs []store.DirectEvent
	for i, k := range kinds {
		ch := "a"
		if i >= 4 {
			ch = "b"
		}
		evs = append(evs, store.DirectEvent{ID: int64(i), Channel: ch, Outcome: k})
	}
	countBatch(d, &store.DirectBatch{Events: evs, HandlerTime: 6 * time.Millisecond, Timed: 6}, nil)
	require.Equal(t, 4.0, testutil.ToFloat64(m.Claimed.WithLabelValues("a")))
	require.Equal(t, 4.0, testutil.ToFloat64(m.Claimed.WithLabelValues("b")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.Succeeded.WithLabelValues("a")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Succeeded.WithLabelValues("b")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Failed.WithLabelValues("a")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.GaveUp.WithLabelValues("b")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Expired.WithLabelValues("b")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Released))
	require.Equal(t, 2, testutil.CollectAndCount(m.HandlerDuration), "one series per channel")
	for ch, want := range map[string]uint64{"a": 4, "b": 2} {
		require.Equal(t, want, histogramCount(t, m.HandlerDuration.WithLabelValues(ch)), "handler times observed on %s", ch)
	}

	// A failed batch counts its events, and observes no handler time.
	countBatch(d, &store.DirectBatch{Events: []store.DirectEvent{{Channel: "c"}}}, errors.New("lost"))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Claimed.WithLabelValues("c")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.Released))
}

// BenchmarkCountBatch: the Go CPU a batch of 1 000 succeeded events costs
// the metrics.
func BenchmarkCountBatch(b *testing.B) {
	m, err := NewMetrics(nil)
	require.NoError(b, err)
	d := &deps{metrics: m}
	evs := make([]store.DirectEvent, 1000)
	for i := range evs {
		evs[i] = store.DirectEvent{ID: int64(i), Channel: "bench", Payload: fmt.Sprint(i), Outcome: events.Succeeded}
	}
	batch := &store.DirectBatch{Events: evs, HandlerTime: time.Millisecond, Timed: len(evs)}
	b.ReportAllocs()
	for b.Loop() {
		countBatch(d, batch, nil)
	}
}

// histogramCount is how many observations the histogram o holds.
func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount()
}
