package sources

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/multas/aggregator/internal/h1"
)

// TLS configures the connection to a portal (SPEC 8 `tls`): a private CA,
// a client certificate for mutual TLS, the name the portal's certificate
// must carry. The zero value uses the shared transport as it is.
type TLS struct {
	// CAFile holds the PEM certificates of the CAs trusted for this
	// portal, instead of the system's.
	CAFile string
	// CertFile and KeyFile hold the PEM client certificate and its key.
	CertFile, KeyFile string
	// ServerName is the name verified in the portal's certificate (and
	// sent as SNI) instead of base_url's host.
	ServerName string
}

// IsZero reports whether t configures nothing.
func (t TLS) IsZero() bool { return t == TLS{} }

// transport returns a transport of its own for a source with TLS settings:
// a copy of rt (h1.WithTLS: the shared transport's timeouts, limits and
// wrappers kept) whose TLS connections use them. Errors name the files,
// never their contents.
func (t TLS) transport(rt http.RoundTripper) (http.RoundTripper, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	var errs []error
	var roots *x509.CertPool
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("tls.ca_file: cannot read %q", t.CAFile))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("tls.ca_file: no PEM certificate in %q", t.CAFile))
		default:
			roots = pool
		}
	}
	var certs []tls.Certificate
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	case t.CertFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("tls: cannot load the key pair %q, %q", t.CertFile, t.KeyFile))
		} else {
			certs = []tls.Certificate{cert}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tr, ok := h1.WithTLS(rt, func(cfg *tls.Config) {
		if cfg.MinVersion == 0 {
			cfg.MinVersion = tls.VersionTLS12
		}
		if roots != nil {
			cfg.RootCAs = roots
		}
		if certs != nil {
			cfg.Certificates = certs
		}
		if t.ServerName != "" {
			cfg.ServerName = t.ServerName
		}
	})
	if !ok {
		return nil, errors.New("tls: the portal transport cannot be configured")
	}
	return tr, nil
}
