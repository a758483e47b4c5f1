package devenv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSConfig configures an in-process NATS server. Zero values mean defaults.
type NATSConfig struct {
	// Port on 127.0.0.1. Default: a free port (kept across Restart).
	Port int
	// NoJetStream runs core NATS only (JetStream is on by default).
	NoJetStream bool
	// StoreDir keeps JetStream's data (kept on Stop). Default: a temporary
	// directory removed on Stop. Restart keeps the data either way.
	StoreDir string
	// MaxPayload is the largest message the server accepts (default: the
	// server's, 1 MiB).
	MaxPayload int32
	// TLS, when set, makes the server accept TLS connections only, with a
	// client certificate signed by its CA (NewNATSTLS).
	TLS *NATSTLS
	// Auth, when set, makes the server accept only users of its operator
	// (NewNATSAuth: JWT and NKey credentials).
	Auth *NATSAuth
	// Name of the server (default "pgrelay-test"): each server of a
	// cluster needs its own.
	Name string
	// Cluster, when set, makes the server one of a NATS cluster on
	// 127.0.0.1, its JetStream clustered (streams may have replicas).
	Cluster *NATSCluster
}

// NATSCluster is a server's part in a cluster: every server of it has the
// same Name and Routes, and a Port of its own among them.
type NATSCluster struct {
	// Name of the cluster.
	Name string
	// Port on 127.0.0.1 that the other servers route to.
	Port int
	// Routes are the cluster ports of every server of the cluster (its own
	// included: a server ignores the route to itself).
	Routes []int
}

// NATS is an in-process NATS server (nats-server/v2), for the tests,
// `pgrelay dev` and `pgrelay bench`. It can be shut down and started again
// on the same port with the same JetStream data, as an outage would.
type NATS struct {
	cfg      NATSConfig
	storeDir string
	ownDir   bool

	mu  sync.Mutex
	srv *server.Server
}

// StartNATS starts a server and waits until it accepts connections.
func StartNATS(cfg NATSConfig) (*NATS, error) {
	n := &NATS{cfg: cfg, storeDir: cfg.StoreDir}
	if !cfg.NoJetStream && n.storeDir == "" {
		dir, err := os.MkdirTemp("", "pgrelay-nats-")
		if err != nil {
			return nil, fmt.Errorf("devenv: make the NATS store dir: %w", err)
		}
		n.storeDir, n.ownDir = dir, true
	}
	if n.cfg.Port == 0 {
		n.cfg.Port = -1
	}
	if err := n.Start(); err != nil {
		n.cleanup()
		return nil, err
	}
	return n, nil
}

// Start starts a server that was Shutdown, on the same port with the same
// JetStream data.
func (n *NATS) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return errors.New("devenv: NATS is already running")
	}
	if n.cfg.Port > 0 {
		// The server only reports a port it cannot listen on by never
		// becoming ready: find out at once.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", n.cfg.Port))
		if err != nil {
			return fmt.Errorf("devenv: NATS port %d: %w", n.cfg.Port, err)
		}
		_ = l.Close()
	}
	name := n.cfg.Name
	if name == "" {
		name = "pgrelay-test"
	}
	opts := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       n.cfg.Port,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  !n.cfg.NoJetStream,
		StoreDir:   n.storeDir,
		MaxPayload: n.cfg.MaxPayload,
		// Tests and dev are small: keep JetStream from reserving much.
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  4 << 30,
	}
	if c := n.cfg.Cluster; c != nil {
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: c.Port}
		for _, p := range c.Routes {
			opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
		}
	}
	if n.cfg.TLS != nil {
		tc, err := n.cfg.TLS.serverConfig()
		if err != nil {
			return err
		}
		opts.TLS, opts.TLSVerify, opts.TLSConfig, opts.TLSTimeout = true, true, tc, 5
	}
	if n.cfg.Auth != nil {
		if err := n.cfg.Auth.apply(opts); err != nil {
			return err
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("devenv: NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("devenv: NATS server did not accept connections on port %d within 30s", n.cfg.Port)
	}
	if n.cfg.Port <= 0 {
		n.cfg.Port = srv.Addr().(*net.TCPAddr).Port
	}
	n.srv = srv
	return nil
}

// Shutdown stops the server, as an outage; Start brings it back.
func (n *NATS) Shutdown() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart shuts the server down and starts it again.
func (n *NATS) Restart() error {
	n.Shutdown()
	return n.Start()
}

// Stop shuts the server down for good and removes its data when it was a
// temporary directory.
func (n *NATS) Stop() {
	n.Shutdown()
	n.cleanup()
}

func (n *NATS) cleanup() {
	if n.ownDir {
		_ = os.RemoveAll(n.storeDir)
	}
}

// URL is the client URL (valid across Restart).
func (n *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.cfg.Port) }

// Port is the server's port.
func (n *NATS) Port() int { return n.cfg.Port }

// Running reports whether the server is up.
func (n *NATS) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv != nil
}

// Server is the running server (nil while shut down).
func (n *NATS) Server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}
