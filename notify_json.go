package pgrelay

import (
	"context"
	"encoding/json"
	"fmt"
)

// NotifyJSON enqueues v, encoded with encoding/json, as one event on
// channel: Notify with the encoding as the payload. A handler registered
// with the processor package's HandleJSON or HandleTxJSON and the same T
// gets v back. A value that does not encode enqueues nothing; its error
// names T.
func NotifyJSON[T any](ctx context.Context, q Querier, channel string, v T, opts ...NotifyOption) (int64, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("pgrelay: notify on channel %q: encode %T as JSON: %w", channel, v, err)
	}
	return Notify(ctx, q, channel, string(payload), opts...)
}
