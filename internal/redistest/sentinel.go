package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinel of StartSentinel knows its
// primary by.
const SentinelMaster = "mymaster"

// Sentinel is a primary, its replica and one Sentinel watching them, of a
// test's own: killing the primary makes the Sentinel promote the replica.
type Sentinel struct {
	t        testing.TB
	Addr     string // the Sentinel's
	primary  *exec.Cmd
	procs    []*exec.Cmd
	replicas []string
}

// StartSentinel starts a primary and a replica (redis-server) and a
// Sentinel (redis-sentinel) that fails the primary over a second after it
// stops answering. They stop when the test ends. Without the binaries the
// test is skipped (failed under CI=true).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	sentinel, err2 := exec.LookPath("redis-sentinel")
	if err1 != nil || err2 != nil {
		missing(t, "redis-server and redis-sentinel are needed (apt-get install redis-server redis-sentinel)")
	}
	s := &Sentinel{t: t}
	t.Cleanup(s.stop)
	dir := t.TempDir()
	ports := FreePorts(t, 3, 0)
	start := func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.procs = append(s.procs, cmd)
		return cmd
	}
	p, r := strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
	s.primary = start(server, "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	waitPing(t, "127.0.0.1:"+p)
	start(server, "--port", r, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--replicaof", "127.0.0.1", p)
	waitPing(t, "127.0.0.1:"+r)
	s.replicas = []string{"127.0.0.1:" + r}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r})
	defer rc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := rc.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica never synchronised with the primary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
		"sentinel monitor %s 127.0.0.1 %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 5000\n", ports[2], dir, SentinelMaster, p, SentinelMaster, SentinelMaster)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	start(sentinel, conf)
	s.Addr = "127.0.0.1:" + strconv.Itoa(ports[2])
	waitPing(t, s.Addr)
	return s
}

// Primary returns the address the Sentinel gives for the primary.
func (s *Sentinel) Primary() string {
	s.t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(context.Background(), SentinelMaster).Result()
	if err != nil || len(addr) != 2 {
		s.t.Fatalf("SENTINEL get-master-addr-by-name: %v %v", addr, err)
	}
	return addr[0] + ":" + addr[1]
}

// KillPrimary kills the first primary (SIGKILL) and waits until the
// Sentinel names another one.
func (s *Sentinel) KillPrimary() {
	s.t.Helper()
	old := s.Primary()
	_ = s.primary.Process.Kill()
	_ = s.primary.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for s.Primary() == old {
		if time.Now().After(deadline) {
			s.t.Fatal("the Sentinel never promoted the replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Sentinel) stop() {
	for _, p := range s.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
}
