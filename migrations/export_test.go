package migrations

// UpFS is Up over the migrations of any file system, for the tests of the
// runner itself.
var UpFS = up
