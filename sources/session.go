package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator/sources/document"
)

// sessions holds one source's session (SPEC 8 auth.session): the cookies
// and extracted values of its session page, kept for ttl, visited by one
// call at a time. Sessions are per replica: nothing is shared.
type sessions struct {
	method, url string
	named       *urlTemplate // the method and the page's path
	header      http.Header
	host        string
	format      document.Format
	names       []string
	extract     []document.Selector // by names' order
	ttl         time.Duration
	now         func() time.Time
	fetch       chan struct{} // a one-slot semaphore: the visitor holds it

	mu     sync.Mutex
	values map[string]string
	until  time.Time
	gen    uint64 // counts the sessions started
}

// compileSession prepares the session of s's spec: its page's request, its
// selectors, and the source's cookie jar.
func (s *Source) compileSession() error {
	ss := s.spec.Auth.Session
	f, err := document.ParseFormat(ss.Format)
	if ss.Format == "" {
		f, err = document.HTML, nil
	}
	if err != nil {
		return fmt.Errorf("auth.session.format: %w", err)
	}
	method := strings.ToUpper(ss.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return errors.New("auth.session.method: not an HTTP method")
	}
	if s.base == nil {
		return nil // base_url is reported already
	}
	ref, err := url.Parse(ss.Path)
	if err != nil || ref.IsAbs() || ref.Host != "" || !strings.HasPrefix(ss.Path, "/") {
		return errors.New("auth.session.path: must be a path under base_url")
	}
	u := strings.TrimSuffix(s.spec.BaseURL, "/") + ss.Path
	if ss.TTL < 0 {
		return errors.New("auth.session.ttl: negative")
	}
	se := &sessions{method: method, url: u, host: s.host, format: f, ttl: ss.TTL, now: s.now,
		named: newURLTemplate(method, templatePath(s.spec.BaseURL, ss.Path)),
		fetch: make(chan struct{}, 1), names: slices.Sorted(maps.Keys(ss.Extract))}
	se.header = s.voucherH.Clone() // the source's headers
	se.header.Set("Accept", f.Accept())
	for _, name := range se.names {
		sel, err := document.Compile(f, s.spec.Response.Namespaces, ss.Extract[name])
		if err != nil {
			return fmt.Errorf("auth.session.extract.%s: %w", name, err)
		}
		se.extract = append(se.extract, sel)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	s.client.Jar = &originJar{base: s.base, jar: jar}
	s.sessions = se
	return nil
}

// originJar keeps a source's cookies for its own origin only: a cookie jar
// judges by host name, so another port or scheme of the same host would
// get them (SPEC 9: cookies never go to another origin).
type originJar struct {
	base *url.URL
	jar  http.CookieJar
}

func (j *originJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	if sameOrigin(j.base, u) {
		j.jar.SetCookies(u, cookies)
	}
}

func (j *originJar) Cookies(u *url.URL) []*http.Cookie {
	if !sameOrigin(j.base, u) {
		return nil
	}
	return j.jar.Cookies(u)
}

// current is the session's values and generation, if it is still good.
func (se *sessions) current() (map[string]string, uint64, bool) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.values != nil && (se.ttl == 0 || se.now().Before(se.until)) {
		return se.values, se.gen, true
	}
	return nil, 0, false
}

// get returns a good session's values, visiting the session page under ctx
// when none is held; calls that need one meanwhile wait for it.
func (se *sessions) get(ctx context.Context, s *Source) (map[string]string, uint64, error) {
	if v, gen, ok := se.current(); ok {
		return v, gen, nil
	}
	select {
	case se.fetch <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, transportError(ctx, ctx.Err())
	}
	defer func() { <-se.fetch }()
	if v, gen, ok := se.current(); ok {
		return v, gen, nil
	}
	values, err := se.visit(ctx, s)
	if err != nil {
		return nil, 0, err
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	se.gen++
	se.values, se.until = values, se.now().Add(se.ttl)
	return values, se.gen, nil
}

// drop ends session gen (the portal no longer honours it), unless a newer
// one replaced it.
func (se *sessions) drop(gen uint64) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.gen == gen {
		se.values = nil
	}
}

// visit requests the session page and extracts its values.
func (se *sessions) visit(ctx context.Context, s *Source) (map[string]string, error) {
	req, err := http.NewRequestWithContext(withAuthRequest(withURLTemplate(ctx, se.named)), se.method, se.url, nil)
	if err != nil {
		return nil, unbuildable(errors.New("session page"))
	}
	req.Header = se.header.Clone()
	if se.host != "" {
		req.Host = se.host
	}
	resp, err := s.client.Do(req)
	if err != nil {
		e := transportError(ctx, err)
		e.Err = fmt.Errorf("session page: %w", e.Err)
		return nil, e
	}
	defer resp.Body.Close()
	pause := s.pause(resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		drain(resp.Body)
		return nil, statusError(resp.StatusCode, pause)
	}
	body, over, err := readLimited(resp.Body, nil, s.maxBytes)
	switch {
	case err != nil:
		e := transportError(ctx, err)
		e.Pause = pause
		return nil, e
	case over:
		return nil, unreadable(resp.StatusCode, pause, fmt.Errorf("session page larger than %d bytes", s.maxBytes))
	}
	d, err := document.Parse(ctx, se.format, document.Charset{}, body, resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, answerError(ctx, resp.StatusCode, pause, fmt.Errorf("session page: %w", err))
	}
	root, err := d.Root()
	if err != nil {
		return nil, answerError(ctx, resp.StatusCode, pause, fmt.Errorf("session page: %w", err))
	}
	values := make(map[string]string, len(se.names))
	for i, name := range se.names {
		v, ok, err := d.First(se.extract[i], root)
		if err != nil {
			return nil, answerError(ctx, resp.StatusCode, pause, fmt.Errorf("session page: %w", err))
		}
		if !ok || v.Text == "" || v.NotText {
			return nil, unreadable(resp.StatusCode, pause, fmt.Errorf("session page: %s not found", name))
		}
		values[name] = v.Text
	}
	return values, nil
}

// isSessionPage reports whether a 2xx answer is the session page again:
// every extract selector finds something in it. The body is read (at most
// maxBytes) and put back, so the caller reads the whole answer as sent.
func (se *sessions) isSessionPage(ctx context.Context, s *Source, resp *http.Response) bool {
	if len(se.extract) == 0 {
		return false
	}
	body, over, err := readLimited(resp.Body, nil, s.maxBytes)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), errReader{err}, resp.Body), resp.Body}
	if err != nil || over {
		return false
	}
	d, err := document.Parse(ctx, se.format, document.Charset{}, body, resp.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	root, err := d.Root()
	if err != nil {
		return false
	}
	for _, sel := range se.extract {
		if ok, err := d.Present(sel, root); !ok || err != nil {
			return false
		}
	}
	return true
}

// errReader fails with err, or yields EOF when err is nil.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}
