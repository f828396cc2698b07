package portalsim_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

func TestServerStart(t *testing.T) {
	t.Parallel()
	js := portalsim.Demo()
	s, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	urls := s.URLs()
	if len(urls) != len(js) || len(s.Portals()) != len(js) {
		t.Fatalf("%d URLs and %d portals for %d jurisdictions", len(urls), len(s.Portals()), len(js))
	}
	for i, j := range js {
		p := s.Portal(j.ID)
		if p == nil || p != s.Portals()[i] || p.ID() != j.ID || p.Name() != j.Name || p.Shape() != j.Shape {
			t.Errorf("Portal(%s) = %v, want the portal of %s", j.ID, p, j.ID)
			continue
		}
		if !strings.HasPrefix(urls[j.ID], "http://127.0.0.1:") || s.URL(j.ID) != urls[j.ID] {
			t.Errorf("URL(%s) = %q, URLs()[%s] = %q", j.ID, s.URL(j.ID), j.ID, urls[j.ID])
		}
		got, err := get(t.Context(), client, urls[j.ID]+"/_sim/fault")
		if err != nil || got.status != 200 || !strings.Contains(string(got.body), `"mode":"`+string(j.Fault.Mode)+`"`) {
			t.Errorf("%s /_sim/fault: %d %s, %v", j.ID, got.status, got.body, err)
		}
	}
	if s.Portal("nowhere") != nil || s.URL("nowhere") != "" {
		t.Errorf("an unknown id has a portal or a URL")
	}
}

func TestServerStartAtConsecutivePorts(t *testing.T) {
	t.Parallel()
	js := portalsim.Demo()[:3]
	var (
		s     *portalsim.Server
		first int
		err   error
	)
	// Another process may take a port between the probe and the start.
	for range 5 {
		if first, err = freePorts(len(js)); err != nil {
			continue
		}
		if s, err = portalsim.StartAt("127.0.0.1:"+strconv.Itoa(first), js); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no run of %d free ports: %v", len(js), err)
	}
	t.Cleanup(s.Close)
	for i, j := range js {
		if want := "http://127.0.0.1:" + strconv.Itoa(first+i); s.URL(j.ID) != want {
			t.Errorf("URL(%s) = %s, want %s", j.ID, s.URL(j.ID), want)
		}
	}
}

// freePorts finds n consecutive free loopback ports and returns the first.
func freePorts(n int) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	first := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for i := 1; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first+i))
		if err != nil {
			return 0, err
		}
		l.Close()
	}
	return first, nil
}

func TestServerStartErrors(t *testing.T) {
	t.Parallel()
	ok := portalsim.Demo()[0]
	invalid := ok
	invalid.Shape = "fax"
	tests := []struct {
		name string
		addr string
		js   []portalsim.Jurisdiction
		is   error
	}{
		{"bad address", "localhost", []portalsim.Jurisdiction{ok}, nil},
		{"ports beyond 65535", "127.0.0.1:65535", []portalsim.Jurisdiction{ok, portalsim.Demo()[1]}, nil},
		{"duplicate ids", "127.0.0.1:0", []portalsim.Jurisdiction{ok, ok}, portalsim.ErrInvalidJurisdiction},
		{"invalid jurisdiction", "127.0.0.1:0", []portalsim.Jurisdiction{invalid}, portalsim.ErrInvalidJurisdiction},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := portalsim.StartAt(tt.addr, tt.js)
			if err == nil {
				s.Close()
				t.Fatalf("StartAt(%s) succeeded, want an error", tt.addr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("StartAt(%s) = %v, want %v", tt.addr, err, tt.is)
			}
		})
	}
}

func TestServerShutdownReleasesHangingCalls(t *testing.T) {
	t.Parallel()
	s, err := portalsim.Start([]portalsim.Jurisdiction{testJurisdiction(portalsim.ShapeMultas, portalsim.Fault{Mode: portalsim.Hang})})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	errs := make(chan error, 1)
	go func() {
		_, err := get(t.Context(), client, s.URL("test")+byDomainPath(portalsim.ShapeMultas))
		errs <- err
	}()
	waitFor(t, "the call to hang", func() bool { return s.Portal("test").Calls().InFlight == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v with a hanging call, want it released at once", d)
	}
	if err := <-errs; err == nil {
		t.Errorf("the hanging call got an answer, want a connection error")
	}
}

// TestNoGoroutineLeftAfterClose is not parallel: it counts every goroutine
// of the process, which only this test may have started at that time.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	js := []portalsim.Jurisdiction{
		testJurisdiction(portalsim.ShapeActas, portalsim.Fault{Mode: portalsim.Hang}),
		testJurisdiction(portalsim.ShapeMultas, portalsim.Fault{Mode: portalsim.Slow, Latency: time.Hour}),
		testJurisdiction(portalsim.ShapeInfracciones, portalsim.Fault{Mode: portalsim.Down}),
	}
	js[0].ID, js[1].ID, js[2].ID = "hang", "slow", "down"
	s, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	done := make(chan struct{})
	for _, j := range js {
		for range 3 {
			go func() {
				defer func() { done <- struct{}{} }()
				get(context.Background(), client, s.URL(j.ID)+byDomainPath(j.Shape))
			}()
		}
	}
	waitFor(t, "six calls to hang", func() bool {
		return s.Portal("hang").Calls().InFlight == 3 && s.Portal("slow").Calls().InFlight == 3
	})
	s.Close()
	for range 3 * len(js) {
		<-done
	}
	client.CloseIdleConnections()
	waitFor(t, "no goroutine of the simulator or its connections", func() bool {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "aggregator/portalsim.") && !strings.Contains(stacks, "net/http.(*conn).serve")
	})
}
