package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsFiles writes a self-signed certificate and its key into a temporary
// directory, and a file that holds no PEM at all.
func tlsFiles(t *testing.T) (cert, key, garbage string) {
	t.Helper()
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, DNSNames: []string{"redis.test"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, garbage = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "garbage.pem")
	write := func(path string, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	write(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	write(garbage, []byte("not a certificate"))
	return cert, key, garbage
}

func TestStoreValidation(t *testing.T) {
	t.Parallel()
	cert, key, garbage := tlsFiles(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	tests := []struct {
		name string
		data string
		want []want
	}{
		{"a list of hosts in redis_url", doc(`store: {redis_url: "redis://a:6379,b:6379"}`), []want{
			{"store.redis_url", "holds a list of hosts"}}},
		{"a list of hosts with a password", doc(`store: {redis_url: "redis://:pw@a:6379,b:6379/0"}`), []want{
			{"store.redis_url", "store.cluster.addrs"}}},
		{"redis_url bad port", doc(`store: {redis_url: "redis://a:0"}`), []want{{"store.redis_url", "port"}}},
		{"redis_url no host", doc(`store: {redis_url: "redis:///0"}`), []want{{"store.redis_url", "host is missing"}}},
		{"redis_url db", doc(`store: {redis_url: "redis://a:6379/zero"}`), []want{{"store.redis_url", "database number"}}},
		{"redis_url query", doc(`store: {redis_url: "redis://a:6379/0?pool_size=3"}`), []want{{"store.redis_url", "query parameters"}}},
		{"unix without path", doc(`store: {redis_url: "unix://"}`), []want{{"store.redis_url", "unix:///path"}}},
		{"two kinds", doc(`store: {redis_url: "redis://a:6379", cluster: {addrs: ["b:6379"]}, sentinel: {master: m, addrs: ["c:26379"]}}`), []want{
			{"store", "set only one of redis_url, cluster and sentinel, got redis_url and cluster and sentinel"}}},
		{"cluster addrs", doc(`store: {cluster: {addrs: ["a:6379", "b", "a:6379", "c:99999", "d:1,e:2"]}}`), []want{
			{"store.cluster.addrs[1]", `want host:port such as 10.0.0.1:6379, got "b"`},
			{"store.cluster.addrs[2]", "listed twice (also store.cluster.addrs[0])"},
			{"store.cluster.addrs[3]", "want host:port"},
			{"store.cluster.addrs[4]", "want host:port"},
		}},
		{"sentinel without addrs", doc(`store: {sentinel: {master: mymaster}}`), []want{{"store.sentinel.addrs", "required"}}},
		{"sentinel without master", doc(`store: {sentinel: {addrs: ["a:26379"]}}`), []want{{"store.sentinel.master", "required"}}},
		{"credentials with redis_url", doc(`store: {redis_url: "redis://a:6379", username: u, password: p}`), []want{
			{"store.username", "a redis_url carries its own"},
			{"store.password", "a redis_url carries its own"},
		}},
		{"credentials without redis", doc(`store: {password: p}`), []want{{"store.password", "no Redis is configured"}}},
		{"numbers", doc(`store: {redis_url: "redis://a:6379", pool_size: -1, timeout: 0s, flush_interval: -1ms}`), []want{
			{"store.pool_size", "must not be negative"},
			{"store.timeout", "must be positive"},
			{"store.flush_interval", "must be positive"},
		}},
		{"prefix with a hash tag", doc(`store: {key_prefix: "agg{x}:"}`), []want{{"store.key_prefix", "hash tags"}}},
		{"tls without redis", doc(`store: {tls: {enabled: true}}`), []want{{"store.tls", "no Redis is configured"}}},
		{"tls on redis://", doc(`store: {redis_url: "redis://a:6379", tls: {enabled: true}}`), []want{{"store.tls.enabled", "write rediss://"}}},
		{"tls files while off", doc(`store: {cluster: {addrs: ["a:6379"]}, tls: {ca_file: "` + cert + `"}}`), []want{{"store.tls.enabled", "is false"}}},
		{"tls files unreadable and invalid", doc(`store: {cluster: {addrs: ["a:6379"]}, tls: {enabled: true, ca_file: "` + missing + `", cert_file: "` + garbage + `", key_file: "` + key + `"}}`), []want{
			{"store.tls.ca_file", "cannot read it"},
			{"store.tls.cert_file", "cannot load the certificate"},
		}},
		{"ca without certificates", doc(`store: {redis_url: "rediss://a:6379", tls: {ca_file: "` + garbage + `"}}`), []want{{"store.tls.ca_file", "no PEM certificate"}}},
		{"cert without key", doc(`store: {sentinel: {master: m, addrs: ["a:26379"]}, tls: {enabled: true, cert_file: "` + cert + `"}}`), []want{{"store.tls.key_file", "required"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tc.data, nil)
			if len(errs) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(errs), len(tc.want), errs)
			}
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					found = found || e.Key == w.key && strings.Contains(e.Msg, w.msg)
				}
				if !found {
					t.Errorf("no error %s: …%s… in:\n%v", w.key, w.msg, errs)
				}
			}
			if msg := errs.Error(); strings.Contains(msg, "pw@") {
				t.Errorf("an error shows the URL's password:\n%s", msg)
			}
		})
	}
}

func TestStoreValid(t *testing.T) {
	t.Parallel()
	cert, key, _ := tlsFiles(t)
	tests := []struct {
		name string
		data string
		tls  bool
	}{
		{"standalone", doc(`store: {redis_url: "redis://:pw@127.0.0.1:6379/2", pool_size: 20, timeout: 100ms, flush_interval: 5ms}`), false},
		{"host without port", doc(`store: {redis_url: "redis://redis.internal"}`), false},
		{"unix socket", doc(`store: {redis_url: "unix:///run/redis.sock?db=3"}`), false},
		{"rediss with a CA", doc(`store: {redis_url: "rediss://a:6380", tls: {ca_file: "` + cert + `", server_name: redis.test}}`), true},
		{"cluster", doc(`store: {cluster: {addrs: ["10.0.0.1:7000", "10.0.0.2:7000"]}, username: u, password: p}`), false},
		{"cluster with mutual TLS", doc(`store: {cluster: {addrs: ["a:7000"]}, tls: {enabled: true, ca_file: "` + cert + `", cert_file: "` + cert + `", key_file: "` + key + `"}}`), true},
		{"sentinel", doc(`store: {sentinel: {master: mymaster, addrs: ["a:26379", "b:26379"]}, password: p}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.data), "test.yaml", nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !c.Store.Shared() {
				t.Error("Shared() = false")
			}
			tc2, err := c.Store.TLSConfig()
			if err != nil || (tc2 != nil) != tc.tls {
				t.Errorf("TLSConfig = %v, %v; want TLS %v", tc2, err, tc.tls)
			}
		})
	}
}
