package sources

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
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
// a clone of rt when it is an *http.Transport (so the source keeps the
// shared timeouts and limits), else of http.DefaultTransport, with the
// settings applied. Errors name the files, never their contents.
func (t TLS) transport(rt http.RoundTripper) (*http.Transport, error) {
	var tr *http.Transport
	if shared, ok := rt.(*http.Transport); ok {
		tr = shared.Clone()
	} else if def, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = def.Clone()
	} else {
		return nil, errors.New("tls: no *http.Transport to configure")
	}
	cfg := tr.TLSClientConfig
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	var errs []error
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("tls.ca_file: cannot read %q", t.CAFile))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("tls.ca_file: no PEM certificate in %q", t.CAFile))
		default:
			cfg.RootCAs = pool
		}
	}
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	case t.CertFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("tls: cannot load the key pair %q, %q", t.CertFile, t.KeyFile))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if t.ServerName != "" {
		cfg.ServerName = t.ServerName
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tr.TLSClientConfig = cfg
	return tr, nil
}
