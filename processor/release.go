package processor

import "runtime/debug"

// modulePath is pgrelay's module.
const modulePath = "github.com/pgrelay/pgrelay"

// release is the pgrelay release this program links, which the Processor
// records in pgrelay.processors (the console and `pgrelay nodes` show it):
// the version of the module the program requires, "dev" in pgrelay's own
// builds and whenever the build does not say.
func release() string { return releaseOf(debug.ReadBuildInfo()) }

func releaseOf(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "dev"
	}
	for _, m := range bi.Deps {
		if m.Path != modulePath {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "dev"
}
