package processor

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Call is one call of a Go handler as a Middleware sees it.
type Call struct {
	// Handler is the name the handler was registered under.
	Handler string
	// Events are the events of the call: one, or the batch of a
	// HandleTxBatch handler.
	Events []pgrelay.Event
	// Tx is the transaction of a HandleTx, HandleTxJSON or HandleTxBatch
	// handler, nil for Handle and HandleJSON: a middleware may write
	// through it (it commits with the events' success, as the handler's
	// writes do) but must not commit or roll it back.
	Tx pgx.Tx
}

// Middleware wraps every call of the Processor's Go handlers (Handle,
// HandleTx, HandleTxBatch and the JSON forms): logging, metrics, tracing,
// recovering panics. It calls next to go on (the next middleware, then the
// handler), with ctx or a context derived from it, and returns the call's
// result: next's error, or one of its own (pgrelay.Permanent,
// pgrelay.RetryAfter and a timeout mean what they mean from a handler). A
// middleware that does not call next skips the handler. With tracing on
// (Config.TracerProvider), ctx carries the attempt's span.
type Middleware func(ctx context.Context, call Call, next func(ctx context.Context) error) error

// Use adds middlewares around every Go handler of p, registered before or
// after: the first given runs outermost, and each Use wraps inside the
// middlewares of the Uses before it. It panics after Start, as Handle does.
func (p *Processor) Use(mws ...Middleware) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != nil {
		panic("pgrelay: Use after Start")
	}
	for _, mw := range mws {
		if mw == nil {
			panic("pgrelay: Use: nil middleware")
		}
	}
	p.middleware = append(p.middleware, mws...)
}

// goHandlers is p's handlers wrapped in its middlewares, as Start and Work
// run them. The caller holds p.mu.
func (p *Processor) goHandlers() map[string]handlers.GoHandler {
	if len(p.middleware) == 0 {
		return p.handlers
	}
	mws := slices.Clone(p.middleware)
	wrapped := make(map[string]handlers.GoHandler, len(p.handlers))
	for name, h := range p.handlers {
		wrapped[name] = wrap(name, h, mws)
	}
	return wrapped
}

// wrap is h, the handler name, with mws around each call.
func wrap(name string, h handlers.GoHandler, mws []Middleware) handlers.GoHandler {
	if batch := h.Batch; batch != nil {
		h.Batch = func(ctx context.Context, tx pgx.Tx, evs []handlers.Event) error {
			call := Call{Handler: name, Events: make([]pgrelay.Event, len(evs)), Tx: tx}
			for i, ev := range evs {
				call.Events[i] = eventOf(ev)
			}
			return chain(ctx, mws, call, func(ctx context.Context) error { return batch(ctx, tx, evs) })
		}
		return h
	}
	fn, inTx := h.Fn, h.Tx
	h.Fn = func(ctx context.Context, tx pgx.Tx, ev handlers.Event) error {
		call := Call{Handler: name, Events: []pgrelay.Event{eventOf(ev)}}
		if inTx {
			call.Tx = tx
		}
		return chain(ctx, mws, call, func(ctx context.Context) error { return fn(ctx, tx, ev) })
	}
	return h
}

// chain runs mws[0] around mws[1] … around handler.
func chain(ctx context.Context, mws []Middleware, call Call, handler func(ctx context.Context) error) error {
	if len(mws) == 0 {
		return handler(ctx)
	}
	return mws[0](ctx, call, func(ctx context.Context) error {
		return chain(ctx, mws[1:], call, handler)
	})
}
