package chaos

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/multas/aggregator/api"
)

// contract checks answers against api/openapi.yaml, as internal/apitest
// does for the tests, but returning errors: the long mode has no
// testing.T. It is safe for concurrent use.
type contract struct {
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	if err != nil {
		return nil, fmt.Errorf("loading api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validating api/openapi.yaml: %w", err)
	}
	doc.Servers = nil // route by path alone, whatever the replica's host
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing api/openapi.yaml: %w", err)
	}
	return &contract{router: router}, nil
})

// check reports how an answer of status, header and body to a GET of u
// departs from the document: an undocumented status, a missing or
// malformed documented header, an undeclared content type, a JSON body
// that does not match its schema.
func (c *contract) check(u *url.URL, status int, header http.Header, body []byte) error {
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: u.EscapedPath(), RawQuery: u.RawQuery}, Header: http.Header{}}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no operation for GET %s: %w", u.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			// A voucher is the portal's body, whatever its content type.
			ExcludeResponseBody: !isJSON(header.Get("Content-Type")) ||
				route.Operation.OperationID == "getVoucher" && status == http.StatusOK,
			MultiError: true,
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	// ValidateResponse checked the content type of JSON bodies only.
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil || len(ref.Value.Content) == 0 {
		return nil
	}
	if ref.Value.Content.Get(header.Get("Content-Type")) == nil {
		return fmt.Errorf("Content-Type %q is not declared for status %d", header.Get("Content-Type"), status)
	}
	return nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
