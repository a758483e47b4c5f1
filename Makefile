# pgrelay — a transactional outbox and event dispatcher for PostgreSQL.
#
#   make dev    run pgrelay on embedded defaults (throwaway PostgreSQL, demo channel, live view)
#   make test   vet, lint and run every test against real PostgreSQL
#   make build  build bin/pgrelay
#   make lint   gofmt, go vet, staticcheck

GO      ?= go
BIN     := bin/pgrelay
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/pgrelay/pgrelay/internal/cli.Version=$(VERSION)
# Tests are sized for a 2-core machine: two packages at a time.
TESTFLAGS ?= -count=1 -p 2 -timeout 15m

.PHONY: dev test build lint deps deps-test

# PostgreSQL 15 for dev; the tests also need pglogical (the two-node cluster).
deps:
	@./scripts/ensure-postgres.sh

deps-test:
	@./scripts/ensure-postgres.sh --pglogical

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/pgrelay

dev: deps build
	./$(BIN) dev

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) -C bench/river vet ./...

# ./... includes internal/cli's TestBenchPeerRiver: `pgrelay bench --peer river`
# at a tiny size and bench/river's own tests (River's module comes from the
# Go module proxy; -short skips them), and TestIntegritySoakShort: the
# integrity suite's short form, about a minute (docs/reliability.md).
test: deps-test lint
	$(GO) test $(TESTFLAGS) ./...
	$(GO) test $(TESTFLAGS) -race -run 'Actor|Race' ./actors/...
