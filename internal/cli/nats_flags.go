package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/secret"
)

// natsFlags are the NATS flags of `pgrelay run` and `pgrelay dev` (and, in
// part, `pgrelay watch`).
type natsFlags struct {
	url, creds, tlsCert, tlsKey, tlsCA string
	stream                             string
	maxAge                             time.Duration
	retention                          string
	maxBytes                           int64
	replicas                           int
	batch                              int
	interval                           time.Duration
}

// registerConn adds the flags that say how to reach NATS.
func (n *natsFlags) registerConn(fs *flag.FlagSet, urlHelp string) {
	fs.StringVar(&n.url, "nats-url", "", urlHelp)
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (JWT and NKey seed)")
	fs.StringVar(&n.tlsCert, "nats-tls-cert", "", "client certificate for NATS over TLS (with --nats-tls-key)")
	fs.StringVar(&n.tlsKey, "nats-tls-key", "", "key of --nats-tls-cert")
	fs.StringVar(&n.tlsCA, "nats-tls-ca", "", "CA bundle to verify the NATS server with")
	fs.StringVar(&n.stream, "nats-stream", bus.DefaultStream, "JetStream stream of the status events")
}

// register adds the Processor's NATS flags.
func (n *natsFlags) register(fs *flag.FlagSet) {
	n.registerConn(fs, "NATS server URL: publish every status event on pgrelay.events.<channel>.<event> "+
		"and run nats channels (default: no NATS; docs/events.md)")
	fs.DurationVar(&n.maxAge, "nats-max-age", 0, "max age of the stream's messages (default: 168h for a new stream, an existing stream's own)")
	fs.StringVar(&n.retention, "nats-retention", "", "retention of the stream: limits or interest (default: limits for a new stream, an existing stream's own)")
	fs.Int64Var(&n.maxBytes, "nats-max-bytes", 0, "max size of the stream in bytes, oldest messages removed first (default: none for a new stream, an existing stream's own)")
	fs.IntVar(&n.replicas, "nats-replicas", 0, "servers of the NATS cluster that keep a copy of the stream, 1-5, applied to an existing stream too (default: 1 for a new stream, an existing stream's own)")
	d := actors.Defaults().NATS
	fs.IntVar(&n.batch, "nats-publish-batch", d.PublishBatch, "most events published per round (1-4000)")
	fs.DurationVar(&n.interval, "nats-publish-interval", d.PublishInterval, "how often the publisher looks for new events once caught up")
}

// config is the Processor's NATS configuration: the flags as given, its URL
// empty (no NATS) without --nats-url; `pgrelay bench nats` publishes with
// the other settings to a server of its own then.
func (n *natsFlags) config() *actors.NATSConfig {
	return &actors.NATSConfig{URL: n.url, CredsFile: n.creds, TLSCert: n.tlsCert, TLSKey: n.tlsKey,
		TLSCA: n.tlsCA, Stream: n.stream, MaxAge: n.maxAge, Retention: n.retention, MaxBytes: n.maxBytes,
		Replicas: n.replicas, PublishBatch: n.batch, PublishInterval: n.interval}
}

// busOptions are the connection options of the flags.
func (n *natsFlags) busOptions(logger *slog.Logger) bus.Options {
	return bus.Options{URL: n.url, CredsFile: n.creds, TLSCert: n.tlsCert, TLSKey: n.tlsKey, TLSCA: n.tlsCA,
		Name: "pgrelay watch", Logger: logger}
}

// devNATSPort is where `pgrelay dev` runs its NATS server when it is free:
// NATS's default port, so `pgrelay watch` finds it without flags.
const devNATSPort = 4222

// startDevNATS starts `pgrelay dev`'s in-process NATS server with JetStream
// (on port, or 4222 when free, else any free port) unless --nats-url names
// one, and points the Processor at it. stop is never nil.
func startDevNATS(f *natsFlags, port int) (stop func(), err error) {
	if f.url != "" {
		return func() {}, nil
	}
	var n *devenv.NATS
	if port == 0 {
		// 4222 when free; when it is taken (or taken meanwhile), any port.
		if l, lerr := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", devNATSPort)); lerr == nil {
			_ = l.Close()
			n, err = devenv.StartNATS(devenv.NATSConfig{Port: devNATSPort})
		}
		if n == nil {
			n, err = devenv.StartNATS(devenv.NATSConfig{})
		}
	} else {
		n, err = devenv.StartNATS(devenv.NATSConfig{Port: port})
	}
	if err != nil {
		return func() {}, err
	}
	f.url = n.URL()
	return n.Stop, nil
}

// watchCommand is how to follow a NATS server's events; self is how to run
// this binary (selfCommand).
func watchCommand(self, url string) string {
	if url == "nats://127.0.0.1:4222" || url == "nats://localhost:4222" {
		return self + " watch"
	}
	return self + " watch --nats-url " + secret.String(url)
}
