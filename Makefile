# pgrelay — a transactional outbox and event dispatcher for PostgreSQL.
#
#   make dev    run pgrelay on embedded defaults (throwaway PostgreSQL, demo channel, live view)
#   make test   vet, lint and run every test against real PostgreSQL
#   make build  build bin/pgrelay
#   make install          install pgrelay to $(PREFIX)/bin (default /usr/local/bin)
#   make install-service  install the systemd unit (docs/systemd/pgrelay.service)
#   make lint   gofmt, go vet, staticcheck

GO      ?= go
BIN     := bin/pgrelay
# The release is internal/version.Release, set in the source at each release;
# the commit is read from the build's VCS stamp by `pgrelay version`.
# Tests are sized for a 2-core machine: two packages at a time.
TESTFLAGS ?= -count=1 -p 2 -timeout 15m
# The cluster tests run on pgEdge Spock too when a PostgreSQL built with it is
# found (a pgEdge install, or the build in ../shared/spock); without it their
# Spock variants skip, saying so.
ifeq ($(origin SPOCK_PG_HOME),undefined)
ifneq ($(wildcard $(CURDIR)/../shared/spock/pg15-spock/bin/postgres),)
export SPOCK_PG_HOME := $(CURDIR)/../shared/spock/pg15-spock
endif
endif

.PHONY: dev test build lint deps deps-test deps-go deps-browser deps-promtool deps-node install install-service

PREFIX     ?= /usr/local
SYSTEMDDIR ?= /etc/systemd/system

# PostgreSQL 15 for dev; the tests also need pglogical (the two-node cluster).
deps:
	@./scripts/ensure-postgres.sh

deps-test:
	@./scripts/ensure-postgres.sh --pglogical

# The go.mod files of both modules' whole graphs, in the module cache:
# TestGoDocBuilds builds docs/go.md's blocks offline (GOPROXY=off), in
# modules whose graphs are these, and a build reads go.mod files that no
# build of this repository downloads (those of older modules' requirements).
deps-go:
	$(GO) list -m all > /dev/null
	$(GO) -C bench/river list -m all > /dev/null

# Chromium for the console's browser test (it skips without one).
deps-browser:
	@./scripts/ensure-chromium.sh

# promtool (Debian's prometheus package) for the alert rules' test, which
# runs `promtool test rules` over docs/alerts.yml (it skips without one).
deps-promtool:
	@./scripts/ensure-promtool.sh

# Node.js and the npm packages of the Node.js subscriber test, and jq (both
# skip, saying so, without them).
deps-node:
	@./scripts/ensure-node-subscriber.sh

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/pgrelay

# DESTDIR is prepended for packaging (make install DESTDIR=pkgroot).
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/pgrelay

# The unit runs $(PREFIX)/bin/pgrelay as the system user pgrelay, with its
# settings in /etc/pgrelay/pgrelay.env (docs/user-guide.md, "As a systemd service").
install-service:
	install -d $(DESTDIR)$(SYSTEMDDIR)
	sed 's|/usr/local/bin/pgrelay|$(PREFIX)/bin/pgrelay|' docs/systemd/pgrelay.service > $(DESTDIR)$(SYSTEMDDIR)/pgrelay.service
	chmod 0644 $(DESTDIR)$(SYSTEMDDIR)/pgrelay.service

dev: deps build
	./$(BIN) dev

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) -C bench/river vet ./...

# ./... includes internal/bench's TestBenchPeerRiver: `pgrelay bench --peer river`
# at a tiny size and bench/river's own tests (River's module comes from the
# Go module proxy; -short skips them), TestIntegritySoakShort: the
# integrity suite's short form, about a minute (docs/reliability.md), and
# TestConsoleInBrowser: the console in a headless Chromium (deps-browser),
# TestAlertRules: docs/alerts.yml under `promtool test rules` (deps-promtool),
# and TestNodeSubscriber: a Node.js JetStream consumer (deps-node).
#
# The actors package runs once, under the race detector, every test of it:
# its tests were nearly all run twice before (without, then with -race).
test: deps-test deps-go deps-browser deps-promtool deps-node lint
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v '^github.com/pgrelay/pgrelay/actors$$')
	$(GO) test $(TESTFLAGS) -race ./actors/...
