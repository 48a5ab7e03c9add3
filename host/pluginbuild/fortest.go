package pluginbuild

import "context"

// TB is the part of testing.TB that ForTest uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Context() context.Context
}

// ForTest builds the plugin in dir (see Build) and returns the path of its .wasm file,
// failing the test if the build fails. Within a test binary each plugin is built once.
func ForTest(t TB, dir string, opts ...Option) string {
	t.Helper()
	path, err := Build(t.Context(), dir, opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}
