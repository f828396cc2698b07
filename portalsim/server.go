package portalsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Server runs portals on loopback listeners, one port each, so that they
// are real HTTP servers to their clients (connection errors included).
type Server struct {
	portals []*Portal
	urls    map[string]string
	servers []*http.Server
	serving sync.WaitGroup
}

// Start serves each of js on its own 127.0.0.1 listener with a free port.
func Start(js []Jurisdiction) (*Server, error) { return StartAt("127.0.0.1:0", js) }

// StartAt serves js on addr's host: js[i] on addr's port + i, or each on a
// free port when addr's port is 0. Every jurisdiction is validated first;
// ids must be unique. On error nothing is left running.
func StartAt(addr string, js []Jurisdiction) (*Server, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("portalsim: listen address: %w", err)
	}
	first, err := strconv.Atoi(portText)
	if err != nil || first < 0 || first+len(js) > 65536 {
		return nil, fmt.Errorf("portalsim: listen address %q: port out of range for %d portals", addr, len(js))
	}
	var errs []error
	seen := make(map[string]bool, len(js))
	for _, j := range js {
		if seen[j.ID] {
			errs = append(errs, fmt.Errorf("%w %q: duplicate id", ErrInvalidJurisdiction, j.ID))
		}
		seen[j.ID] = true
		if err := j.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	listeners := make([]net.Listener, 0, len(js))
	for i := range js {
		port := 0
		if first != 0 {
			port = first + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("portalsim: %s: %w", js[i].ID, err)
		}
		listeners = append(listeners, ln)
	}

	s := &Server{urls: make(map[string]string, len(js))}
	for i, j := range js {
		p := New(j)
		srv := &http.Server{
			Handler:           p,
			ReadHeaderTimeout: 10 * time.Second,
			// Aborted calls are the point of a fault injector, not news.
			ErrorLog: log.New(io.Discard, "", 0),
		}
		s.portals = append(s.portals, p)
		s.servers = append(s.servers, srv)
		s.urls[j.ID] = "http://" + listeners[i].Addr().String()
		s.serving.Add(1)
		go func(ln net.Listener) {
			defer s.serving.Done()
			srv.Serve(ln)
		}(listeners[i])
	}
	return s, nil
}

// URLs maps each jurisdiction id to its portal's base URL.
func (s *Server) URLs() map[string]string {
	m := make(map[string]string, len(s.urls))
	for id, u := range s.urls {
		m[id] = u
	}
	return m
}

// URL is the base URL of the portal of jurisdiction id, or "".
func (s *Server) URL(id string) string { return s.urls[id] }

// Portal is the portal of jurisdiction id, or nil.
func (s *Server) Portal(id string) *Portal {
	for _, p := range s.portals {
		if p.ID() == id {
			return p
		}
	}
	return nil
}

// Portals lists the portals in the order of the jurisdictions.
func (s *Server) Portals() []*Portal { return append([]*Portal(nil), s.portals...) }

// Close stops every portal at once: hanging and sleeping calls are
// released, connections closed, and Close returns when no handler or
// serving goroutine is left.
func (s *Server) Close() {
	for _, p := range s.portals {
		p.release()
	}
	for _, srv := range s.servers {
		srv.Close()
	}
	s.wait()
}

// Shutdown stops the portals gracefully: hanging and sleeping calls are
// released (their connections closed), calls being answered may finish
// until ctx is done, then everything is closed as by Close.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, p := range s.portals {
		p.release()
	}
	var errs []error
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			srv.Close()
		}
	}
	s.wait()
	return errors.Join(errs...)
}

func (s *Server) wait() {
	for _, p := range s.portals {
		p.calls.waitIdle()
	}
	s.serving.Wait()
}
