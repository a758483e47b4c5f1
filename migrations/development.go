package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Between releases v0.1.0 and v0.2.0 the schema changed through a series of
// migrations, each restating the functions it changed. Release v0.2.0 folds
// them into one, 0003_v0_2_0, with the functions in their files
// (functions.go). A database migrated by a development build records names
// of that series, which this pgrelay does not have:
//
//   - one that records the whole series is at v0.2.0's schema: its records
//     become 0003_v0_2_0's, and the function files are applied;
//   - one that records only part of it is refused, with what to do: migrate
//     it with the series' last build first.
//
// 0003_v0_2_0 landed before the release, and what came after it until the
// release was folded into it too (foldedLater). A database migrated in that
// window records 0003_v0_2_0 and, perhaps, a later migration: the later
// record is removed (its change is the fold's); a later change the database
// lacks is applied, once every table is held.

// developmentSeries is the series, in order.
var developmentSeries = []record{
	{3, "dead_letters"}, {4, "go_handlers"}, {5, "viewer"}, {6, "rejoin_proof"}, {7, "producer_path"},
	{8, "console_go"}, {9, "go_direct"}, {10, "claim_channel"}, {11, "arm_wakes"}, {12, "notify_helpers"},
	{13, "queue_after_insert"}, {14, "plans_by_key"}, {15, "may_adopt"}, {16, "complete_narrow"},
	{17, "roles"}, {18, "event_settings"}, {19, "publish_enqueued"}, {20, "complete_outcomes"},
	{21, "priority_columns"}, {22, "flow_control"}, {23, "producer_options"}, {24, "cancel_snooze"},
	{25, "schedules"}, {26, "dead_letters_origin"}, {27, "event_traces"}, {28, "wake_hint"},
}

// developmentSeriesEnd is the last commit whose migrations are the series.
const developmentSeriesEnd = "78ae9af"

// folded is the migration the series became.
var folded = record{3, "v0_2_0"}

// foldedLater are the migrations written after folded first landed, folded
// into it before the release: each with a query that says whether a
// database lacks its change, and the change, idempotent (as folded states
// it).
var foldedLater = []struct {
	record
	missing string
	change  string
}{
	{record{4, "log_priority"},
		`SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) 'pgrelay.dead_letters'::pg_catalog.regclass
		   AND a.attname OPERATOR(pg_catalog.=) 'priority' AND NOT a.attisdropped)`,
		`ALTER TABLE pgrelay.log ADD COLUMN IF NOT EXISTS priority smallint NULL;
		 ALTER TABLE pgrelay.dead_letters ADD COLUMN IF NOT EXISTS priority smallint NULL`},
}

// foldLater removes the records of foldedLater from a database that records
// folded, and returns the changes it lacks, to apply once every table is
// held.
func foldLater(ctx context.Context, tx pgx.Tx, records []record) ([]record, []string, error) {
	has := map[record]bool{}
	for _, r := range records {
		has[r] = true
	}
	if !has[folded] {
		return records, nil, nil
	}
	var kept []record
	later := map[record]bool{}
	for _, f := range foldedLater {
		later[f.record] = true
	}
	for _, r := range records {
		if !later[r] {
			kept = append(kept, r)
		}
	}
	var changes []string
	for _, f := range foldedLater {
		if has[f.record] {
			if _, err := tx.Exec(ctx, `DELETE FROM pgrelay.schema_migrations WHERE version OPERATOR(pg_catalog.=) $1::pg_catalog.int4`, f.Version); err != nil {
				return nil, nil, fmt.Errorf("migrate: map %04d_%s to %04d_%s: %w", f.Version, f.Name, folded.Version, folded.Name, err)
			}
			continue
		}
		var missing bool
		if err := tx.QueryRow(ctx, f.missing).Scan(&missing); err != nil {
			return nil, nil, fmt.Errorf("migrate: check %04d_%s's change: %w", f.Version, f.Name, err)
		}
		if missing {
			changes = append(changes, f.change)
		}
	}
	return kept, changes, nil
}

// mapDevelopmentRecords returns records with the whole development series
// replaced by the migration it became, in the database too; an error for
// part of the series.
func mapDevelopmentRecords(ctx context.Context, tx pgx.Tx, records []record, known map[int]string) ([]record, error) {
	inSeries := map[record]bool{}
	for _, r := range developmentSeries {
		inSeries[r] = true
	}
	var kept []record
	found := 0
	var first record
	for _, r := range records {
		if inSeries[r] && known[int(r.Version)] != r.Name {
			if found == 0 {
				first = r
			}
			found++
			continue
		}
		kept = append(kept, r)
	}
	if found == 0 {
		return records, nil
	}
	if found != len(developmentSeries) {
		return nil, fmt.Errorf("migrate: the database records migration %04d_%s of the development series between v0.1.0 "+
			"and v0.2.0, but not the whole series: migrate it first with a pgrelay built at commit %s (the series' last), "+
			"then with this one; nothing was changed (docs/upgrading.md)", first.Version, first.Name, developmentSeriesEnd)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM pgrelay.schema_migrations WHERE version OPERATOR(pg_catalog.>=) $1::pg_catalog.int4`, developmentSeries[0].Version); err != nil {
		return nil, fmt.Errorf("migrate: map the development series: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pgrelay.schema_migrations (version, name) VALUES ($1::pg_catalog.int4, $2::pg_catalog.text)`,
		folded.Version, folded.Name); err != nil {
		return nil, fmt.Errorf("migrate: map the development series: %w", err)
	}
	return append(kept, folded), nil
}
