package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// harDoc is what the tests read of a HAR written by -record.
type harDoc struct {
	Log struct {
		Comment string `json:"comment"`
		Entries []struct {
			Request struct {
				Method, URL string
			} `json:"request"`
			Response struct {
				Status  int `json:"status"`
				Content struct {
					Text, Encoding string
				} `json:"content"`
			} `json:"response"`
		} `json:"entries"`
	} `json:"log"`
}

// sources check -record against the hostile portal of
// TestSourcesCheckHostile: every request of each lookup is written (the
// token requests, their redirects, the session page), with no secret in
// any form anywhere in the file, decoded bodies included; each file is
// mode 0600, and stderr says it holds personal data. Then, the servers
// gone offline and the environment empty (CI), the recordings replay:
// sources test -update writes golden files from them, and sources test
// finds the replays the same.
func TestSourcesCheckRecordHostile(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	dir := filepath.Join(t.TempDir(), "recordings") // made by -record
	var stdout, stderr syncBuffer
	err := run(context.Background(), []string{"sources", "check", "-config", h.cfgPath, "-domain", "AB123CD", "-record", dir},
		func(k string) string { return hostileEnv[k] }, &stdout, &stderr)
	if got := exitCode(err); got != 1 { // foreign and raw fail
		t.Fatalf("check exit status %d, want 1:\n%s\n%s", got, stdout.String(), stderr.String())
	}
	for _, want := range []string{"personal data", "mode 0600", "recorded " + filepath.Join(dir, "session.har")} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", st.Mode(), err)
	}

	// Which requests each lookup made: token and session requests, and
	// every hop of a redirect, are in the file.
	requests := map[string][]string{
		"upper":   {"POST /oauth/token", "GET /api/actas"},
		"hop":     {"POST /hop/2", "POST /hop/1", "POST /hop/0", "GET /api/actas"},
		"foreign": {"POST /to"},
		"session": {"GET /sesion", "GET /s/***/k/***/actas"},
		"body":    {"POST /body"},
		"hostile": {"GET /hostile"},
		"raw":     {"GET /raw"},
	}
	for source, want := range requests {
		path := filepath.Join(dir, source+".har")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", source, err)
			continue
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
		}
		var doc harDoc
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Errorf("%s: %v", source, err)
			continue
		}
		if wantComment := "aggregator sources check -source " + source + " -domain AB123CD"; doc.Log.Comment != wantComment {
			t.Errorf("%s: comment %q, want %q", source, doc.Log.Comment, wantComment)
		}
		texts := []string{string(raw)}
		var got []string
		for _, e := range doc.Log.Entries {
			path, _, _ := strings.Cut(strings.SplitN(e.Request.URL, "/", 4)[3], "?")
			got = append(got, e.Request.Method+" /"+path)
			if e.Response.Content.Encoding == "base64" {
				b, err := base64.StdEncoding.DecodeString(e.Response.Content.Text)
				if err != nil {
					t.Errorf("%s: %v", source, err)
				}
				texts = append(texts, string(b))
			}
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: requests %q, want %q", source, got, want)
		}
		for _, text := range texts {
			for _, secret := range hostileSecrets() {
				if strings.Contains(text, secret) {
					t.Errorf("%s.har holds secret %q", source, secret)
				}
			}
		}
	}

	// Offline, without the portals' secrets.
	h.offline.Store(true)
	good := "upper,hop,session,body,hostile"
	for _, args := range [][]string{{"-update"}, nil} {
		var stdout, stderr syncBuffer
		err := run(context.Background(), append(append([]string{"sources", "test", "-config", h.cfgPath, "-source", good}, args...), dir),
			noEnv, &stdout, &stderr)
		if exitCode(err) != 0 {
			t.Fatalf("sources test %v: exit status %d\n%s\n%s", args, exitCode(err), stdout.String(), stderr.String())
		}
		if want := "5 of 5 source(s) replayed"; !strings.Contains(stdout.String(), want) {
			t.Errorf("sources test %v: output lacks %q:\n%s", args, want, stdout.String())
		}
	}
	for source := range strings.SplitSeq(good, ",") {
		path := filepath.Join(dir, source+".golden.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
		}
		if !strings.Contains(string(raw), `"id": "Q-1"`) {
			t.Errorf("%s lacks the infraction:\n%s", path, raw)
		}
		for _, secret := range hostileSecrets() {
			if strings.Contains(string(raw), secret) {
				t.Errorf("%s holds secret %q", path, secret)
			}
		}
	}
}
