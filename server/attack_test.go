package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
	c, _, err := dialSlow(addr, bodyRequest(0, len(asyncBody)*1000, ""), time.Minute)
	if err != nil {
		select {
		case <-stop:
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	defer c.Close()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = c.Read(make([]byte, 1))
	}()
	stopDrip := dripping(c, asyncBody, time.Second)
	select {
	case <-stop:
	case <-answered:
	}
	stopDrip()
	c.Close()
	<-answered
}
