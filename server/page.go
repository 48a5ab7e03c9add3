package server

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed web
var web embed.FS

// pageSecurity are the page's security headers: it runs its own script and style
// only, talks to its own server only, and is framed by no other page (clickjacking).
var pageSecurity = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Frame-Options":        "DENY",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
}

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
		for k, v := range pageSecurity {
			w.Header().Set(k, v)
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
