package sources

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/internal/h1"
	"github.com/multas/aggregator/tracing"
)

// testPKI is a CA made for the test, with a server certificate for
// "portal.test" only and a client certificate, written as PEM files.
type testPKI struct {
	pool                 *x509.CertPool
	server               tls.Certificate
	caFile, certFile     string
	keyFile, otherCAFile string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	ca, caKey, caPEM := newCA("test CA")
	_, _, otherPEM := newCA("other CA")
	issue := func(serial int64, usage x509.ExtKeyUsage, dns []string) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprint("leaf ", serial)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	srvCert, srvKey := issue(2, x509.ExtKeyUsageServerAuth, []string{"portal.test"})
	cliCert, cliKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	server, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{pool: x509.NewCertPool(), server: server,
		caFile: filepath.Join(dir, "ca.pem"), otherCAFile: filepath.Join(dir, "other.pem"),
		certFile: filepath.Join(dir, "client.pem"), keyFile: filepath.Join(dir, "client.key")}
	p.pool.AddCert(ca)
	for file, data := range map[string][]byte{p.caFile: caPEM, p.otherCAFile: otherPEM, p.certFile: cliCert, p.keyFile: cliKey} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestMutualTLS: a portal that requires a client certificate signed by
// its CA, with a certificate for portal.test only, answers a source with
// the CA, the client certificate and the server name, and no other.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, oneItem)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	full := TLS{CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "portal.test"}
	// The shared transport of the tests, and the production one: h1 under
	// the tracing transport, whose client span must survive the copy.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	transports := map[string]func() http.RoundTripper{
		"net/http": func() http.RoundTripper { return &http.Transport{} },
		"h1":       func() http.RoundTripper { return tracing.Transport(&h1.Transport{}, tp, nil) },
	}
	for _, tc := range []struct {
		name string
		tls  TLS
		ok   bool
	}{
		{"mutual", full, true},
		{"no client certificate", TLS{CAFile: pki.caFile, ServerName: "portal.test"}, false},
		{"system CAs", TLS{CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "portal.test"}, false},
		{"another CA", TLS{CAFile: pki.otherCAFile, CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "portal.test"}, false},
		{"wrong server name", TLS{CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "otro.test"}, false},
	} {
		for kind, transport := range transports {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				spec := testSpec(srv.URL)
				spec.TLS = tc.tls
				shared := transport()
				s := newSource(t, spec, &http.Client{Transport: shared})
				t.Cleanup(s.client.CloseIdleConnections)
				if s.client.Transport == shared {
					t.Fatal("the source uses the shared transport, want its own")
				}
				ctx, span := tp.Tracer("test").Start(t.Context(), kind+"/"+tc.name)
				a, err := s.Lookup(ctx, domainQuery)
				span.End()
				if kind == "h1" && !clientSpanUnder(spans, span.SpanContext().TraceID()) {
					t.Error("no client span: the copy lost the tracing transport")
				}
				if tc.ok {
					if err != nil || len(a.Infractions) != 1 {
						t.Fatalf("Lookup: %v (%d items)", err, len(a.Infractions))
					}
					return
				}
				var e *Error
				if !errors.As(err, &e) || e.Outcome != aggregator.Unavailable {
					t.Fatalf("got %v, want source-unavailable", err)
				}
			})
		}
	}
}

// clientSpanUnder reports whether a client span of trace id ended.
func clientSpanUnder(spans *tracetest.SpanRecorder, id trace.TraceID) bool {
	for _, s := range spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.SpanContext().TraceID() == id {
			return true
		}
	}
	return false
}

// TestTLSFiles: unreadable or wrong files fail New, naming the file only.
func TestTLSFiles(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	for _, tc := range []TLS{
		{CAFile: filepath.Join(t.TempDir(), "missing.pem")},
		{CAFile: pki.keyFile},
		{CertFile: pki.certFile},
		{CertFile: pki.certFile, KeyFile: pki.caFile},
	} {
		spec := testSpec("https://portal.test")
		spec.TLS = tc
		if _, err := New(spec, nil, nil); err == nil {
			t.Errorf("New with %+v: no error", tc)
		} else if key, _ := os.ReadFile(pki.keyFile); len(key) > 40 && strings.Contains(err.Error(), string(key[30:40])) {
			t.Errorf("error %q carries the key", err)
		}
	}
}
