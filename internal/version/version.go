// Package version holds pgrelay's release: the one place that names it.
package version

// Release is the release this source is: set to the release's tag (v0.2.0)
// in the commit that the tag names, and to the next release with "-dev"
// right after it. Every build prints it (`pgrelay version`, the console,
// `pgrelay nodes`, the pgrelay_build_info metric): `make build`, `go
// install` and a plain `go build` alike, with or without a tag in the
// clone.
const Release = "v0.3.0-dev"
