package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server of a test's own, on loopback and without
// persistence, which the test stops and starts again on the same port (a
// restart, a crash). It is killed when the test ends.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartServer starts a Server on a free port, with the configuration
// args (redis-server's command line) for this start. Without redis-server
// the test is skipped (failed under CI=true).
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server not installed: "+err.Error())
	}
	s := &Server{t: t, bin: bin, port: FreePorts(t, 1, 0)[0], dir: t.TempDir()}
	t.Cleanup(s.Kill)
	s.Start(args...)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Start runs the server (again, empty) with the configuration args and
// waits until it answers.
func (s *Server) Start(args ...string) {
	s.t.Helper()
	log := filepath.Join(s.dir, "redis.log")
	s.cmd = exec.Command(s.bin, append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", log}, args...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			s.t.Fatalf("redis-server on port %d never answered; its log:\n%s", s.port, b)
		}
	}
}

// Stop shuts the server down (SHUTDOWN) and waits until it is gone.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	_ = c.Shutdown(context.Background()).Err() // the connection drops: an error
	_ = c.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// FreePorts returns n loopback ports that nothing listens on, each with
// port+offset free too (a cluster node's bus port; 0 for none). They are
// below the kernel's ephemeral range: a port inside it can be taken as the
// local port of any outgoing connection between this check and the
// server's start, or while a test has its server stopped.
func FreePorts(t testing.TB, n, offset int) []int {
	t.Helper()
	lo, hi := 10000, ephemeralStart()-offset
	if hi-lo < 100 {
		t.Fatalf("no room for ports below the ephemeral range (%d) with offset %d", hi+offset, offset)
	}
	used := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		p := lo + rand.IntN(hi-lo)
		if used[p] || used[p+offset] || !free(p) || offset > 0 && !free(p+offset) {
			continue
		}
		used[p], used[p+offset] = true, true
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("only %d of %d free ports found below the ephemeral range", len(ports), n)
	}
	return ports
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return p
}

func free(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
