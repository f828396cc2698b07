package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-variant", "both-and-more"},
		{"-duration", "soon"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

// TestRunPrintsSummary runs the memory variant for a moment: the summary
// table comes out, without a broken invariant.
func TestRunPrintsSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chaos suite for a few seconds")
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-variant", "memory", "-duration", "2s", "-workers", "2", "-quiet"},
		func(string) string { return "" }, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"chaos run  variant memory", "requests", "half-open", "violations  0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary without %q:\n%s", want, out.String())
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("-quiet, yet on stderr: %s", errOut.String())
	}
}
