package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/mod/semver"

	"github.com/pgrelay/pgrelay/internal/version"
)

// The functions, with the triggers that run them, are not restated by the
// numbered migrations: each has one file under functions/<group>/, which
// holds its current definition (CREATE OR REPLACE), its grants and the
// comments that explain it. Numbered migrations change data and structure
// only (tables, columns, indexes, roles, and the DROP of a function whose
// signature or result changes), and the runner applies every function file
// after them, in path order, in the same transaction, whenever the files
// differ from those last applied to the database: their checksum and the
// release that applied them are recorded in pgrelay.schema_functions
// (docs/architecture.md, "The schema's files").
//
// Function bodies are not checked against the tables when they are created
// (check_function_bodies off, as pg_dump restores): a function may name one
// defined in a later file.

//go:embed all:functions
var functionFiles embed.FS

// functionSet is the function files of a pgrelay build.
type functionSet struct {
	files    []functionFile
	checksum string
}

type functionFile struct {
	path string // relative to functions/
	sql  string
}

// Functions returns the function files' paths (under functions/) and SQL,
// in the order they are applied.
func Functions() ([][2]string, error) {
	fset, err := readFunctions(functionFiles)
	if err != nil {
		return nil, err
	}
	out := make([][2]string, len(fset.files))
	for i, f := range fset.files {
		out[i] = [2]string{f.path, f.sql}
	}
	return out, nil
}

// readFunctions reads every .sql file under functions/ of fsys.
func readFunctions(fsys fs.FS) (*functionSet, error) {
	var set functionSet
	err := fs.WalkDir(fsys, "functions", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if path.Ext(p) != ".sql" {
			return fmt.Errorf("%s is not a .sql file", p)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		set.files = append(set.files, functionFile{path: strings.TrimPrefix(p, "functions/"), sql: string(b)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the function files: %w", err)
	}
	sort.Slice(set.files, func(i, j int) bool { return set.files[i].path < set.files[j].path })
	h := sha256.New()
	for _, f := range set.files {
		fmt.Fprintf(h, "%s\n%d\n%s", f.path, len(f.sql), f.sql)
	}
	set.checksum = hex.EncodeToString(h.Sum(nil))
	return &set, nil
}

// appliedFunctions is what pgrelay.schema_functions records: the checksum of
// the function files last applied and the release that applied them, both
// empty when none were.
type appliedFunctions struct {
	checksum, release string
}

func readAppliedFunctions(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (appliedFunctions, error) {
	var a appliedFunctions
	err := q.QueryRow(ctx, `SELECT COALESCE(pg_catalog.max(checksum), ''), COALESCE(pg_catalog.max(release), '')
		FROM pgrelay.schema_functions`).Scan(&a.checksum, &a.release)
	if err != nil {
		return a, fmt.Errorf("read the applied functions' checksum: %w", err)
	}
	return a, nil
}

// newer tells whether release a is newer than this build's.
func newerRelease(a string) bool {
	return semver.IsValid(a) && semver.Compare(a, version.Release) > 0
}

// errNewerFunctions: the functions were applied by a newer pgrelay, which
// this one must not undo.
func errNewerFunctions(a appliedFunctions) error {
	return fmt.Errorf("the database's pgrelay functions were applied by pgrelay %s, newer than this pgrelay's %s: "+
		"run that release's Processors and migrate (docs/upgrading.md)", a.release, version.Release)
}

// applyFunctions runs every function file in tx and records them.
func applyFunctions(ctx context.Context, tx pgx.Tx, set *functionSet) error {
	// The notifier's functions belong to pgrelay_notifier, which may own a
	// new one only with CREATE on its schema: for this step only, as the
	// notifier's baseline does.
	if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('check_function_bodies', 'off', true);
		GRANT CREATE ON SCHEMA pgrelay_notifier TO pgrelay_notifier`); err != nil {
		return fmt.Errorf("migrate: prepare the functions: %w", err)
	}
	// A SQL-standard body (RETURN, BEGIN ATOMIC) is parsed when created,
	// whatever check_function_bodies says: a file naming a function or a
	// type of a later file, new in this release, waits for the others.
	pending := set.files
	for len(pending) > 0 {
		var later []functionFile
		var firstErr error
		for _, f := range pending {
			err := applyFunctionFile(ctx, tx, f)
			if err == nil {
				continue
			}
			if !isUndefined(err) {
				return fmt.Errorf("migrate: apply functions/%s: %w", f.path, err)
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("migrate: apply functions/%s: %w", f.path, err)
			}
			later = append(later, f)
		}
		if len(later) == len(pending) {
			return firstErr
		}
		pending = later
	}
	if _, err := tx.Exec(ctx, `REVOKE CREATE ON SCHEMA pgrelay_notifier FROM pgrelay_notifier;
		SELECT pg_catalog.set_config('check_function_bodies', 'on', true);
		DELETE FROM pgrelay.schema_functions`); err != nil {
		return fmt.Errorf("migrate: after the functions: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pgrelay.schema_functions (checksum, release)
		VALUES ($1::pg_catalog.text, $2::pg_catalog.text)`, set.checksum, version.Release); err != nil {
		return fmt.Errorf("migrate: record the functions: %w", err)
	}
	return nil
}

// FunctionsApplied tells whether the database has this build's function
// files (false for a database never migrated).
func FunctionsApplied(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT pg_catalog.to_regclass('pgrelay.schema_functions'::pg_catalog.text) IS NOT NULL").Scan(&exists); err != nil {
		return false, fmt.Errorf("read the applied functions' checksum: %w", err)
	}
	if !exists {
		return false, nil
	}
	set, err := readFunctions(functionFiles)
	if err != nil {
		return false, err
	}
	a, err := readAppliedFunctions(ctx, q)
	if err != nil {
		return false, err
	}
	return a.checksum == set.checksum, nil
}

// requireFunctions returns an error unless the database's functions are
// this build's.
func requireFunctions(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	ok, err := FunctionsApplied(ctx, q)
	if err != nil || ok {
		return err
	}
	a, err := readAppliedFunctions(ctx, q)
	if err != nil {
		return err
	}
	if newerRelease(a.release) {
		return errNewerFunctions(a)
	}
	return errors.New("the database's pgrelay functions are not this pgrelay's: run 'pgrelay migrate' first")
}

// applyFunctionFile runs f under a savepoint: a failure leaves the
// transaction as it was before f.
func applyFunctionFile(ctx context.Context, tx pgx.Tx, f functionFile) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := sp.Exec(ctx, f.sql); err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// isUndefined: err says an object f names does not exist (yet): a
// function (42883), a table (42P01) or a type (42704).
func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "42P01" || pe.Code == "42704")
}
