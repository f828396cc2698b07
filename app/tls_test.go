package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
)

// selfSigned writes a certificate for 127.0.0.1, which is its own CA, and
// its key.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// A Redis that takes TLS only, with client certificates: the store's tls
// block (CA, client certificate) is what the replica connects with.
func TestRedisOverTLS(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	srv := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "yes",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server with TLS never listened")
		}
	}

	p := newPortal(t)
	start := func(tls string) (degraded bool) {
		t.Helper()
		cfg, err := config.Parse(fmt.Appendf(nil, `problems: {base_uri: "https://problems.test/"}
store: {redis_url: "rediss://127.0.0.1:%d/0", key_prefix: "tls-%d:", tls: %s}
sources:
  - id: caba
    jurisdiction: CABA
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response: {items: /items, fields: {id: /id}}
`, port, port, tls, p.URL), "tls.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := newApp(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Breakers.Status(context.Background(), breaker.ID{Key: "caba", Operation: aggregator.ByDomain})
		if err != nil {
			t.Fatal(err)
		}
		return a.StoreDegraded()
	}
	if start(fmt.Sprintf("{ca_file: %q, cert_file: %q, key_file: %q}", cert, cert, key)) {
		t.Error("degraded with the CA and a client certificate: the tls block was not used")
	}
	if !start(fmt.Sprintf("{ca_file: %q}", cert)) {
		t.Error("shared state without a client certificate, which the server requires")
	}
}

// newApp starts an App of cfg, closed when the test ends.
func newApp(t *testing.T, cfg *config.Config) (*app.App, error) {
	t.Helper()
	a, err := app.New(cfg, app.Options{})
	if err == nil {
		t.Cleanup(func() { _ = a.Close() })
	}
	return a, err
}
