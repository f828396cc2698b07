package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/server"
)

// healthyApp is a replica with one source whose portal answers one
// infraction at once, configured with the server block given (YAML flow
// members, "" for the defaults), served by server.HTTPServer on a loopback
// port until the test ends. change, when not nil, is applied to the
// http.Server first.
func healthyApp(tb testing.TB, serverBlock string, change func(*http.Server)) (*app.App, string) {
	tb.Helper()
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"actas": [{"nro": "A-1"}]}`)
	}))
	tb.Cleanup(portal.Close)
	cfg, err := config.Parse([]byte(`server: {admin_token: "`+fuzzAdminToken+`"`+serverBlock+`}
problems: {base_uri: "`+fuzzBase+`"}
webhooks: {allow_private: true}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
    response: {items: /actas, fields: {id: /nro}}
`), "healthy.yaml", nil)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Close() })
	srv := server.HTTPServer("127.0.0.1:0", a.Server, time.Duration(cfg.Query.MaxDeadline))
	if change != nil {
		change(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return a, ln.Addr().String()
}

// asyncHead is the head of a POST /v1/queries whose body of n bytes is
// still to come.
func asyncHead(n int) string {
	return fmt.Sprintf("POST /v1/queries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n)
}

// BenchmarkSlowBodyAttack is the attack of issue 18 on a replica with the
// default configuration: 1,100 connections each sending the body of a
// POST /v1/queries at 1 byte/s (reconnecting when cut off, as an attacker
// would), while a client sends healthy queries, 20 a second. It reports
// the share of healthy queries answered 200 and 503 and their latency
// (p50, p99, max), with no attack and under it, for docs/security.md:
//
//	go test -run '^$' -bench SlowBodyAttack -benchtime 15s ./server/
func BenchmarkSlowBodyAttack(b *testing.B) {
	for _, attackers := range []int{0, 1100} {
		b.Run(fmt.Sprintf("attackers=%d", attackers), func(b *testing.B) {
			benchmarkSlowBodyAttack(b, attackers)
		})
	}
}

func benchmarkSlowBodyAttack(b *testing.B, attackers int) {
	var active atomic.Int64
	_, addr := healthyApp(b, "", func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateActive {
				active.Add(1)
			}
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range attackers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				dribble(addr, stop)
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// The attack is in place once every attacker's request has reached
	// the server.
	for deadline := time.Now().Add(time.Minute); active.Load() < int64(attackers); {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d attackers reached the server", active.Load(), attackers)
		}
		time.Sleep(10 * time.Millisecond)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	var took []time.Duration
	statuses := map[int]int{}
	for b.Loop() {
		<-pace.C
		begin := time.Now()
		resp, err := client.Get("http://" + addr + "/v1/infractions?domain=AB123CD")
		if err != nil {
			statuses[0]++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(begin))
		statuses[resp.StatusCode]++
	}
	n := float64(b.N)
	b.ReportMetric(float64(statuses[http.StatusOK])/n*100, "%200")
	b.ReportMetric(float64(statuses[http.StatusServiceUnavailable])/n*100, "%503")
	b.ReportMetric(float64(statuses[0])/n*100, "%failed")
	if len(took) > 0 {
		slices.Sort(took)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
		b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
		b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// dribble sends one POST /v1/queries whose body comes at 1 byte/s, until
// the server answers or hangs up, or stop is closed.
func dribble(addr string, stop <-chan struct{}) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		select {
		case <-stop:
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	defer c.Close()
	const body = `{"domain": "AB123CD", "callback_url": "http://127.0.0.1:1/hook"}`
	if _, err := io.WriteString(c, asyncHead(len(body)*1000)); err != nil {
		return
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = bufio.NewReader(c).ReadByte()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			c.Close()
			<-answered
			return
		case <-answered:
			return
		case <-tick.C:
			if _, err := c.Write([]byte{body[i%len(body)]}); err != nil {
				c.Close()
				<-answered
				return
			}
		}
	}
}
