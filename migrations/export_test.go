package migrations

import (
	"context"
	"io/fs"
)

// UpFS is Up over the migrations of any file system, for the tests of the
// runner itself.
func UpFS(ctx context.Context, db Beginner, fsys fs.FS) (Result, error) {
	return up(ctx, db, fsys, nil, Options{}, true)
}

// UpFSFunctions is UpFS with the function files of fsys (under functions/).
func UpFSFunctions(ctx context.Context, db Beginner, fsys fs.FS) (Result, error) {
	fset, err := readFunctions(fsys)
	if err != nil {
		return Result{}, err
	}
	return up(ctx, db, fsys, fset, Options{}, true)
}

// SeriesRecord is a migration of the development series.
type SeriesRecord struct {
	Version int
	Name    string
}

// DevelopmentSeries is the series between v0.1.0 and v0.2.0 (development.go).
func DevelopmentSeries() []SeriesRecord {
	out := make([]SeriesRecord, len(developmentSeries))
	for i, r := range developmentSeries {
		out[i] = SeriesRecord{int(r.Version), r.Name}
	}
	return out
}
