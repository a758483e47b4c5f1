package migrations

import (
	"context"
	"io/fs"
)

// UpFS is Up over the migrations of any file system, for the tests of the
// runner itself.
func UpFS(ctx context.Context, db Beginner, fsys fs.FS) (Result, error) {
	return up(ctx, db, fsys, Options{}, true)
}
