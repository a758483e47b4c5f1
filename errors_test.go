package pgrelay_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/prcodes"
	"github.com/pgrelay/pgrelay/migrations"
)

// raisedCode is a SQLSTATE the migrations raise.
var raisedCode = regexp.MustCompile(`ERRCODE\s*=\s*'(PR[0-9A-Z]{3})'`)

// The PR codes the migrations and the function files raise are exactly
// those the package has a sentinel for: a new code cannot be forgotten, nor a sentinel outlive its
// code. prcodes.Internal never leaves its function; prcodes.ChannelPaused is
// reserved (no longer raised) and may be absent.
func TestSentinelsCoverEveryPRCode(t *testing.T) {
	all, err := migrations.All()
	require.NoError(t, err)
	functions, err := migrations.Functions()
	require.NoError(t, err)
	sql := make([]string, 0, len(all)+len(functions))
	for _, m := range all {
		sql = append(sql, m.SQL)
	}
	for _, f := range functions {
		sql = append(sql, f[1])
	}
	raised := map[string]bool{}
	for _, text := range sql {
		for _, sm := range raisedCode.FindAllStringSubmatch(text, -1) {
			raised[sm[1]] = true
		}
	}
	require.True(t, raised[prcodes.Internal], "the migrations raise %s (test reads them)", prcodes.Internal)
	delete(raised, prcodes.Internal)

	known := map[string]bool{}
	for _, s := range pgrelay.Sentinels() {
		code := pgrelay.SentinelCode(s)
		require.False(t, known[code], "two sentinels of %s", code)
		known[code] = true
	}
	for code := range raised {
		require.True(t, known[code], "the migrations raise %s, which has no sentinel in errors.go (and no constant in internal/prcodes)", code)
	}
	for code := range known {
		if code == prcodes.ChannelPaused {
			continue
		}
		require.True(t, raised[code], "sentinel of %s, which no migration raises", code)
	}
}

// Classify attaches the sentinel of a PR code and keeps everything else.
func TestClassify(t *testing.T) {
	for _, s := range pgrelay.Sentinels() {
		pgErr := &pgconn.PgError{Severity: "ERROR", Code: pgrelay.SentinelCode(s), Message: "refused"}
		err := pgrelay.Classify(fmt.Errorf("op: %w", pgErr))
		require.ErrorIs(t, err, s)
		for _, other := range pgrelay.Sentinels() {
			if other != s {
				require.NotErrorIs(t, err, other)
			}
		}
		got, ok := errors.AsType[*pgconn.PgError](err)
		require.True(t, ok)
		require.Same(t, pgErr, got)
		require.Equal(t, "op: ERROR: refused (SQLSTATE "+pgErr.Code+")", err.Error())
		require.Same(t, err, pgrelay.Classify(err), "classified twice")
	}
	other := &pgconn.PgError{Code: "23505"}
	require.Same(t, error(other), pgrelay.Classify(other))
	require.NoError(t, pgrelay.Classify(nil))
	plain := errors.New("x")
	require.Equal(t, plain, pgrelay.Classify(plain))
	require.False(t, slices.ContainsFunc(pgrelay.Sentinels(), func(s error) bool {
		return errors.Is(pgrelay.Classify(&pgconn.PgError{Code: prcodes.Internal}), s)
	}))
}

// Classify serves pgrelay's SQL functions called directly: register() of a
// channel that exists with another definition is ErrChannelExists.
func TestClassifyDirectSQL(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")
	_, err := d.admin.Exec(bg, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)', p_max_attempts := 3)")
	require.Error(t, err)
	require.NotErrorIs(t, err, pgrelay.ErrChannelExists, "a raw pgx error has no sentinel")
	err = pgrelay.Classify(err)
	require.ErrorIs(t, err, pgrelay.ErrChannelExists)
	require.Contains(t, err.Error(), "max_attempts (5 registered, 3 given)")
}
