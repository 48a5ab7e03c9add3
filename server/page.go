package server

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed web
var web embed.FS

// pageHandler serves the web chat page (web/): plain HTML, CSS and JavaScript, no build
// step and nothing fetched from elsewhere, so it works offline.
func pageHandler() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded directory is there by construction
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		files.ServeHTTP(w, r)
	})
}

//go:embed openapi.json
var openAPI []byte

// serveOpenAPI serves the OpenAPI document of the API.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}
