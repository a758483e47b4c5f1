package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// NATSTLS is a throwaway PKI for a NATS server that requires TLS with client
// certificates: a CA, a server certificate for 127.0.0.1 and localhost, and
// a client certificate, all signed by the CA, written as PEM files.
type NATSTLS struct {
	// CA is the CA certificate (what clients verify the server with).
	CA string
	// ServerCert, ServerKey: the server's certificate and key.
	ServerCert, ServerKey string
	// ClientCert, ClientKey: a client certificate the server accepts.
	ClientCert, ClientKey string
}

// NewNATSTLS makes the PKI in dir (valid for a day).
func NewNATSTLS(dir string) (*NATSTLS, error) {
	t := &NATSTLS{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devenv: CA key: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgrelay test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("devenv: CA certificate: %w", err)
	}
	if err := writePEM(t.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("devenv: %s key: %w", name, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("devenv: %s certificate: %w", name, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return fmt.Errorf("devenv: %s key: %w", name, err)
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if err := leaf(2, "pgrelay test server", x509.ExtKeyUsageServerAuth, t.ServerCert, t.ServerKey); err != nil {
		return nil, err
	}
	if err := leaf(3, "pgrelay test client", x509.ExtKeyUsageClientAuth, t.ClientCert, t.ClientKey); err != nil {
		return nil, err
	}
	return t, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("devenv: write %s: %w", path, err)
	}
	return nil
}

// serverConfig is the server's TLS configuration: its certificate, and
// client certificates required and verified against the CA.
func (t *NATSTLS) serverConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.ServerCert, t.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("devenv: server certificate: %w", err)
	}
	caPEM, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, fmt.Errorf("devenv: read the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("devenv: no certificate in %s", t.CA)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// NATSAuth is a throwaway NATS operator (decentralised JWT authentication):
// an operator, one account with JetStream, and a user of it whose
// credentials file (JWT and NKey seed) the server accepts.
type NATSAuth struct {
	// CredsFile is the user's credentials file.
	CredsFile string

	operator   *jwt.OperatorClaims
	accountPub string
	accountJWT string
	systemPub  string
	systemJWT  string
}

// NewNATSAuth makes the operator, account and user, and writes the user's
// credentials file in dir.
func NewNATSAuth(dir string) (*NATSAuth, error) {
	okp, err := nkeys.CreateOperator()
	if err != nil {
		return nil, fmt.Errorf("devenv: operator key: %w", err)
	}
	opub, err := okp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("devenv: operator key: %w", err)
	}
	// The system account, which JetStream needs in operator mode.
	skp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("devenv: system account key: %w", err)
	}
	spub, err := skp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("devenv: system account key: %w", err)
	}
	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	sjwt, err := sc.Encode(okp)
	if err != nil {
		return nil, fmt.Errorf("devenv: system account JWT: %w", err)
	}
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "pgrelay-test"
	oc.SystemAccount = spub
	ojwt, err := oc.Encode(okp)
	if err != nil {
		return nil, fmt.Errorf("devenv: operator JWT: %w", err)
	}
	if oc, err = jwt.DecodeOperatorClaims(ojwt); err != nil {
		return nil, fmt.Errorf("devenv: operator JWT: %w", err)
	}
	akp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("devenv: account key: %w", err)
	}
	apub, err := akp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("devenv: account key: %w", err)
	}
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "pgrelay"
	// JetStream for the account, without limits.
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(okp)
	if err != nil {
		return nil, fmt.Errorf("devenv: account JWT: %w", err)
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("devenv: user key: %w", err)
	}
	upub, err := ukp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("devenv: user key: %w", err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = "pgrelay"
	uc.IssuerAccount = apub
	ujwt, err := uc.Encode(akp)
	if err != nil {
		return nil, fmt.Errorf("devenv: user JWT: %w", err)
	}
	seed, err := ukp.Seed()
	if err != nil {
		return nil, fmt.Errorf("devenv: user seed: %w", err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		return nil, fmt.Errorf("devenv: credentials: %w", err)
	}
	a := &NATSAuth{CredsFile: filepath.Join(dir, "user.creds"), operator: oc, accountPub: apub, accountJWT: ajwt,
		systemPub: spub, systemJWT: sjwt}
	if err := os.WriteFile(a.CredsFile, creds, 0o600); err != nil {
		return nil, fmt.Errorf("devenv: write %s: %w", a.CredsFile, err)
	}
	return a, nil
}

// apply puts the server in operator mode, trusting a's operator and
// resolving its account from memory.
func (a *NATSAuth) apply(opts *server.Options) error {
	res := &server.MemAccResolver{}
	if err := res.Store(a.accountPub, a.accountJWT); err != nil {
		return fmt.Errorf("devenv: store the account JWT: %w", err)
	}
	if err := res.Store(a.systemPub, a.systemJWT); err != nil {
		return fmt.Errorf("devenv: store the system account JWT: %w", err)
	}
	opts.SystemAccount = a.systemPub
	opts.TrustedOperators = []*jwt.OperatorClaims{a.operator}
	opts.AccountResolver = res
	return nil
}
