.PHONY: run test fuzz bench lint

# Runs the demo: simulated portals on loopback, the API on 127.0.0.1:8080.
run:
	go run ./cmd/aggregator

# Every test, race detector on, with a throwaway Redis (and Chromium,
# promtool) provisioned by scripts/test.sh.
test:
	bash scripts/test.sh

lint:
	gofmt -l $$(git ls-files '*.go')
	go vet ./...
	staticcheck ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

# A short run of every fuzz target (FUZZTIME=30s make fuzz for longer).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$(go list ./...); do \
	  for t in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
