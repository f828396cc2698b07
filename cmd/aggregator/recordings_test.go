package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multas/aggregator/portalsim"
)

// updateRecordings re-records the project's recordings from portalsim:
//
//	go test ./cmd/aggregator -run TestRecordings -update

// recordingsDir holds the project's recordings: the configuration they
// go with, and a directory of HARs and golden files per subject.
const recordingsDir = "../../testdata/recordings"

// recordingSubjects are the subjects recorded, each in a directory of its
// own: a plate with infractions everywhere, a person, and a plate with
// none (each portal's "no records" answer).
var recordingSubjects = []struct{ dir, flag, value string }{
	{"by_domain", "-domain", portalsim.DemoPlate},
	{"by_id", "-id", portalsim.DemoCUIT},
	{"no_infractions", "-domain", portalsim.DemoPlateClean},
}

// The OAuth2 credentials of portalsim, as the recordings' configuration
// takes them: from the environment, which sources test does not have.
var recordingEnv = map[string]string{"PORTALSIM_CLIENT_ID": portalsim.DemoClientID, "PORTALSIM_CLIENT_SECRET": portalsim.DemoClientSecret}

// recordedJurisdictions are the portals recorded: the demo's, healthy,
// the paged one in every paging style, and one of each other shape.
func recordedJurisdictions() []portalsim.Jurisdiction {
	var js []portalsim.Jurisdiction
	shapes := map[portalsim.Shape]bool{}
	for _, j := range portalsim.DemoAll() {
		j.Fault = portalsim.Fault{Mode: portalsim.Healthy}
		js = append(js, j)
		shapes[j.Shape] = true
		if j.Shape != portalsim.ShapePaged {
			continue
		}
		for _, style := range portalsim.PagingStyles() {
			if style != j.Paging.Style {
				p := j
				p.ID, p.Name, p.Paging.Style = j.ID+"-"+string(style), j.Name+" ("+string(style)+")", style
				js = append(js, p)
			}
		}
	}
	for _, s := range portalsim.Shapes() {
		if !shapes[s] {
			js = append(js, portalsim.NewJurisdiction(s, string(s), "Jurisdicción "+string(s), portalsim.RealRecords()))
		}
	}
	return js
}

// recordingsYAML is the configuration of js at baseURLs, its OAuth2
// credentials taken from the environment.
func recordingsYAML(js []portalsim.Jurisdiction, baseURLs map[string]string) string {
	return strings.NewReplacer(
		`"`+portalsim.DemoClientID+`"`, `"${PORTALSIM_CLIENT_ID}"`,
		`"`+portalsim.DemoClientSecret+`"`, `"${PORTALSIM_CLIENT_SECRET}"`,
		"client_id: "+portalsim.DemoClientID+"\n", "client_id: \"${PORTALSIM_CLIENT_ID}\"\n",
		"client_secret: "+portalsim.DemoClientSecret+"\n", "client_secret: \"${PORTALSIM_CLIENT_SECRET}\"\n",
	).Replace(portalsim.AggregatorYAML(js, baseURLs))
}

// The project's recordings of every portalsim dialect, shape and paging
// style replay as their golden files say, offline and without the OAuth2
// credentials: a change in how any of them maps shows here as a
// difference. With -update, they are first recorded again from portalsim
// and their golden files rewritten (review the diff before committing).
func TestRecordings(t *testing.T) {
	t.Parallel()
	js := recordedJurisdictions()
	cfgPath := filepath.Join(recordingsDir, "aggregator.yaml")
	if *update {
		record(t, js, cfgPath)
	}
	for _, s := range recordingSubjects {
		t.Run(s.dir, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(recordingsDir, s.dir)
			status, out, errOut := runSourcesTest(t, "-config", cfgPath, dir)
			if status != 0 {
				t.Errorf("sources test %s: exit status %d (a mapping changed? if so, run go test ./cmd/aggregator -run TestRecordings -update and review the diff)\n%s\n%s",
					dir, status, out, errOut)
			}
			if s.dir != "by_domain" {
				return
			}
			for _, j := range js {
				if _, err := os.Stat(filepath.Join(dir, j.ID+".har")); err != nil {
					t.Errorf("portalsim's %s (%s) has no recording: run go test ./cmd/aggregator -run TestRecordings -update", j.ID, j.Shape)
				}
			}
		})
	}
}

// record records js from portalsim into recordingsDir, with the
// configuration at cfgPath, and writes their golden files.
func record(t *testing.T, js []portalsim.Jurisdiction, cfgPath string) {
	t.Helper()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	live := filepath.Join(t.TempDir(), "live.yaml")
	writeFile(t, live, recordingsYAML(js, sim.URLs()))
	// The configuration committed names no real address: a HAR replays
	// at whatever origin the configuration gives.
	fixed := map[string]string{}
	for _, j := range js {
		fixed[j.ID] = "https://" + j.ID + ".portalsim.invalid"
	}
	committed := recordingsYAML(js, fixed)
	for _, secret := range recordingEnv {
		if strings.Contains(committed, secret) {
			t.Fatalf("the recordings' configuration holds %q: take it from the environment", secret)
		}
	}
	writeFile(t, cfgPath, "# The sources of the project's recordings: portalsim's jurisdictions, every dialect, shape and\n"+
		"# paging style. Written by `go test ./cmd/aggregator -run TestRecordings -update`: do not edit.\n"+committed)
	for _, s := range recordingSubjects {
		dir := filepath.Join(recordingsDir, s.dir)
		old, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, p := range old {
			if strings.HasSuffix(p, harExt) || strings.HasSuffix(p, goldenExt) {
				os.Remove(p)
			}
		}
		var stdout, stderr syncBuffer
		err := run(context.Background(), []string{"sources", "check", "-config", live, s.flag, s.value, "-record", dir},
			func(k string) string { return recordingEnv[k] }, &stdout, &stderr)
		if status := exitCode(err); status != 0 && status != int(exitCheckWarning) {
			t.Fatalf("sources check %s %s: exit status %d\n%s\n%s", s.flag, s.value, status, stdout.String(), stderr.String())
		}
		if status, out, errOut := runSourcesTest(t, "-config", cfgPath, "-update", dir); status != 0 {
			t.Fatalf("sources test -update %s: exit status %d\n%s\n%s", dir, status, out, errOut)
		}
	}
}
