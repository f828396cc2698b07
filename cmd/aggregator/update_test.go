package main

import "flag"

// update rewrites what tests compare with (go test ./cmd/aggregator -update):
// the generated part of examples/, and testdata/recordings re-recorded
// from portalsim with their golden files.
var update = flag.Bool("update", false, "rewrite the generated part of examples/ and re-record testdata/recordings")
