package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterAddrs are the seed nodes of the test Redis Cluster, from
// AGGREGATOR_TEST_REDIS_CLUSTER (host:port,host:port,…; scripts/test.sh
// starts one with scripts/provision-redis-cluster.sh), or none.
func ClusterAddrs() []string {
	v := os.Getenv("AGGREGATOR_TEST_REDIS_CLUSTER")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// ConnectCluster returns a client of the test Redis Cluster, closed when the
// test ends, and its seed nodes. Without a cluster the test is skipped,
// except under CI=true, where it fails.
func ConnectCluster(t testing.TB) (*redis.ClusterClient, []string) {
	t.Helper()
	addrs := ClusterAddrs()
	if len(addrs) == 0 {
		missing(t, "no Redis Cluster (set AGGREGATOR_TEST_REDIS_CLUSTER; scripts/test.sh provisions one)")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		missing(t, fmt.Sprintf("Redis Cluster at %s does not answer: %v", strings.Join(addrs, ","), err))
	}
	return c, addrs
}

// missing skips the test, or fails it under CI=true.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// ClusterPrefix is Prefix for a cluster: the test's keys are deleted from
// every primary when it ends.
func ClusterPrefix(t testing.TB, c *redis.ClusterClient, base string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := base + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			iter := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val())
			}
			return nil
		})
	})
	return prefix
}

// Cluster is a Redis Cluster of a test's own (3 primaries, 3 replicas), whose
// nodes it can kill.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes map[string]*exec.Cmd // by address
	addrs []string
}

// StartCluster starts a Redis Cluster of the test's own on free loopback
// ports, with a node timeout of a second, so that a killed primary is
// replaced within seconds. It is stopped when the test ends. Without
// redis-server and redis-cli the test is skipped (failed under CI=true).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		missing(t, "redis-server and redis-cli are needed to start a Redis Cluster")
	}
	c := &Cluster{t: t, nodes: map[string]*exec.Cmd{}}
	t.Cleanup(c.stop)
	dir := t.TempDir()
	for _, port := range FreePorts(t, 6, 10000) { // with their cluster bus ports
		addr := "127.0.0.1:" + strconv.Itoa(port)
		nd := filepath.Join(dir, strconv.Itoa(port))
		if err := os.Mkdir(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0", "--save", "", "--appendonly", "no", "--dir", nd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.nodes[addr] = cmd
		c.addrs = append(c.addrs, addr)
	}
	for _, a := range c.addrs {
		waitPing(t, a)
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

func waitPing(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server at %s never answered", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addrs are the nodes still running.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.addrs {
		if c.nodes[a] != nil {
			out = append(out, a)
		}
	}
	return out
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// every slot has a running primary.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.healthy() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, a := range c.Addrs() {
				n := redis.NewClient(&redis.Options{Addr: a})
				nodes, err := n.ClusterNodes(context.Background()).Result()
				_ = n.Close()
				fmt.Fprintf(&b, "CLUSTER NODES at %s (%v):\n%s\n", a, err, nodes)
			}
			c.t.Fatalf("the Redis Cluster never became healthy:\n%s", b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() bool {
	ctx := context.Background()
	running := map[string]bool{}
	for _, a := range c.Addrs() {
		running[a] = true
	}
	covered := int64(0)
	for a := range running {
		n := redis.NewClient(&redis.Options{Addr: a})
		info, err := n.ClusterInfo(ctx).Result()
		shards, serr := n.ClusterShards(ctx).Result()
		_ = n.Close()
		if err != nil || serr != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		covered = 0
		for _, sh := range shards {
			if len(sh.Slots) == 0 {
				continue
			}
			p, ok := primary(sh)
			if !ok || !running[p] {
				return false
			}
			for _, r := range sh.Slots {
				covered += r.End - r.Start + 1
			}
		}
	}
	return covered == 16384
}

// primary is the address of the online primary of a shard.
func primary(sh redis.ClusterShard) (string, bool) {
	for _, n := range sh.Nodes {
		if n.Role == "master" && n.Health == "online" {
			return fmt.Sprintf("%s:%d", n.IP, n.Port), true
		}
	}
	return "", false
}

// PrimaryOf returns the address of the primary that serves key now.
func (c *Cluster) PrimaryOf(key string) string {
	c.t.Helper()
	ctx := context.Background()
	n := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	defer n.Close()
	slot, err := n.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	shards, err := n.ClusterShards(ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				if p, ok := primary(sh); ok {
					return p
				}
			}
		}
	}
	c.t.Fatalf("no primary serves slot %d", slot)
	return ""
}

// Kill kills the node at addr (SIGKILL: no goodbye to the cluster).
func (c *Cluster) Kill(addr string) {
	c.mu.Lock()
	cmd := c.nodes[addr]
	c.nodes[addr] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

func (c *Cluster) stop() {
	c.mu.Lock()
	addrs := append([]string(nil), c.addrs...)
	c.mu.Unlock()
	for _, a := range addrs {
		c.Kill(a)
	}
}
