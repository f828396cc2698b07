package async

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestPrivateAddr(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		private bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"10.1.2.3", true}, {"172.16.0.1", true},
		{"172.31.255.255", true}, {"192.168.1.1", true}, {"169.254.169.254", true},
		{"100.64.0.1", true}, {"0.0.0.0", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"::1", true}, {"::", true}, {"fe80::1", true}, {"fc00::1", true}, {"fd12:3456::1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"64:ff9b::7f00:1", true}, {"ff02::1", true},
		{"8.8.8.8", false}, {"172.32.0.1", false}, {"100.128.0.1", false}, {"203.0.113.7", false},
		{"2606:4700:4700::1111", false}, {"64:ff9b::808:808", false}, {"::ffff:8.8.8.8", false},
	} {
		if got := privateAddr(netip.MustParseAddr(tc.addr)); got != tc.private {
			t.Errorf("privateAddr(%s) = %v, want %v", tc.addr, got, tc.private)
		}
	}
}

func TestCheckCallback(t *testing.T) {
	dns := resolver{
		"hooks.example.com":    {"203.0.113.7"},
		"loopback.example.com": {"127.0.0.1"},
		"mixed.example.com":    {"203.0.113.7", "10.0.0.8"},
		"metadata.example.com": {"169.254.169.254"},
		"v6.example.com":       {"::1"},
	}
	g := guard{resolver: dns}
	ctx := context.Background()
	for _, tc := range []struct {
		url, refused string // refused: a word of the reason, "" for accepted
	}{
		{"https://hooks.example.com/cb", ""},
		{"http://hooks.example.com:8080/cb?x=1", ""},
		{"https://203.0.113.7/cb", ""},
		{"https://loopback.example.com/cb", "resolves"},
		{"https://mixed.example.com/cb", "resolves"},
		{"https://metadata.example.com/latest", "resolves"},
		{"https://v6.example.com/", "resolves"},
		{"http://127.0.0.1:9000/cb", "private"},
		{"http://[::1]/cb", "private"},
		{"http://10.0.0.1/cb", "private"},
		{"http://169.254.169.254/latest/meta-data", "private"},
		{"http://0.0.0.0:80/", "private"},
		{"https://nowhere.example.com/cb", "resolve"},
		{"ftp://hooks.example.com/cb", "http"},
		{"/relative/cb", "absolute"},
		{"hooks.example.com/cb", "absolute"},
		{"https:///cb", "host"},
		{"https://user:pw@hooks.example.com/cb", "credentials"},
		{"https://hooks.example.com:99999/cb", "port"},
		{"https://hooks.example.com/" + strings.Repeat("x", 2100), "longer"},
	} {
		why := g.check(ctx, tc.url)
		switch {
		case tc.refused == "" && why != "":
			t.Errorf("check(%s) refused: %s", tc.url, why)
		case tc.refused != "" && !strings.Contains(why, tc.refused):
			t.Errorf("check(%s) = %q, want a refusal mentioning %q", tc.url, why, tc.refused)
		}
	}
	open := guard{resolver: dns, allowPrivate: true}
	for _, u := range []string{"http://127.0.0.1:9000/cb", "https://loopback.example.com/cb"} {
		if why := open.check(ctx, u); why != "" {
			t.Errorf("with allow_private, check(%s) refused: %s", u, why)
		}
	}
	if why := open.check(ctx, "ftp://127.0.0.1/"); why == "" {
		t.Error("with allow_private, ftp accepted")
	}
}

func TestDialControl(t *testing.T) {
	g := guard{}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "10.0.0.1:8080", "169.254.169.254:80"} {
		if err := g.control("tcp", addr, nil); !errors.Is(err, ErrPrivateTarget) {
			t.Errorf("control(%s) = %v, want ErrPrivateTarget", addr, err)
		}
	}
	if err := g.control("tcp", "203.0.113.7:443", nil); err != nil {
		t.Errorf("control(public) = %v", err)
	}
	if err := (guard{allowPrivate: true}).control("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("control with allow_private = %v", err)
	}
}
